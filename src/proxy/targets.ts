import type { Config } from '../config.js';
import { providers, PROVIDER_SLUGS, type ProviderSlug } from '../providers/index.js';

/** Where one provider's calls go: its base address split for fast path joining. */
export interface UpstreamTarget {
  slug: ProviderSlug;
  /** `https://api.openai.com` */
  origin: string;
  /** The base address's own path: `/v1`, `/openai/v1`, or `` (Gemini, DeepSeek). */
  basePath: string;
  /** basePath without its leading slash (`openai/v1`), to recognise paths that already carry it. */
  baseRelative: string;
  /** basePath without its last segment when that segment is a version (`/v1` → ``,
   *  `/openai/v1` → `/openai`); undefined when it is not. A path starting with another version
   *  segment (`v2/chat` on cohere's `/v1`) goes here. */
  versionParent: string | undefined;
  /** The service's own errors take Anthropic's shape here (CONTRACT §3). */
  anthropicErrors: boolean;
}

const VERSION_SEGMENT = /^v\d+(?:(?:alpha|beta)\d*)?$/;

export function buildTargets(config: Pick<Config, 'upstreams'>): Map<string, UpstreamTarget> {
  const targets = new Map<string, UpstreamTarget>();
  for (const slug of PROVIDER_SLUGS) {
    const base = new URL(config.upstreams[slug] ?? providers[slug].defaultBaseUrl);
    const basePath = base.pathname.replace(/\/+$/, '');
    const cut = basePath.lastIndexOf('/');
    const last = basePath.slice(cut + 1);
    targets.set(slug, {
      slug,
      origin: base.origin,
      basePath,
      baseRelative: basePath.slice(1),
      versionParent: basePath !== '' && VERSION_SEGMENT.test(last) ? basePath.slice(0, cut) : undefined,
      anthropicErrors: providers[slug].errorShape === 'anthropic',
    });
  }
  return targets;
}

function firstSegment(rest: string): string {
  let end = 0;
  while (end < rest.length) {
    const c = rest.charCodeAt(end);
    if (c === 0x2f /* / */ || c === 0x3f /* ? */) break;
    end++;
  }
  return rest.slice(0, end);
}

/**
 * The upstream request target for `rest`, what followed `/proxy/{slug}/` (path and query).
 * CONTRACT §2: the rest is appended to the base address, unless it already starts with the
 * base path (an SDK's own `v1/…`, `openai/v1/…`: not doubled) or starts with another version
 * segment (`v2/chat` on `/v1`: replaces it).
 */
export function upstreamPath(target: UpstreamTarget, rest: string): string {
  const base = target.baseRelative;
  if (base !== '' && rest.startsWith(base)) {
    const next = rest.charCodeAt(base.length);
    if (Number.isNaN(next) || next === 0x2f || next === 0x3f) return `/${rest}`;
  }
  if (target.versionParent !== undefined && VERSION_SEGMENT.test(firstSegment(rest))) {
    return `${target.versionParent}/${rest}`;
  }
  if (rest === '' || rest.charCodeAt(0) === 0x3f) return `${target.basePath || '/'}${rest}`;
  return `${target.basePath}/${rest}`;
}

/** `.`/`..` segments, encoded or not; an encoded `/`, `\\` or NUL; a raw `\\`; an empty segment. */
const TRAVERSAL = /(?:^|\/)(?:\.|%2e){1,2}(?:\/|$)|%2f|%5c|%00|\\|\/\/|^\//i;

/**
 * Why a path after `/proxy/{slug}/` may not be forwarded, or undefined when it may: it must
 * stay under the provider's base path on the provider's host, whatever the upstream server
 * normalises (`..`, `%2e%2e%2f`, backslashes, `//host`). Cheap when nothing suspicious is in it.
 */
export function unsafePath(path: string): string | undefined {
  if (
    path.indexOf('.') < 0 &&
    path.indexOf('%') < 0 &&
    path.indexOf('\\') < 0 &&
    path.indexOf('/') !== 0 &&
    path.indexOf('//') < 0
  ) {
    return undefined;
  }
  return TRAVERSAL.test(path)
    ? 'the path may not contain "." or ".." segments (plain or percent-encoded), "//", a backslash, or an encoded "/", "\\" or NUL'
    : undefined;
}
