/**
 * GETs of a provider's admin API: JSON pages, retried on 408, 429 and 5xx with backoff (the
 * provider's Retry-After honoured up to MAX_RETRY_AFTER_MS), refused admin keys named by their
 * variable. Every request names meter in its User-Agent (Anthropic asks integrations to). Messages never carry the key. The key
 * goes to the configured origin only: a redirect is followed only within it. A page is read up
 * to MAX_PAGE_BYTES, a report up to MAX_REPORT_BYTES (CONTRACT §7: provider answers are bounded).
 */

import { MeterError } from '../errors.js';

export interface AdminApi {
  /** Base address, as the proxy's upstream (`https://api.openai.com/v1`). */
  baseUrl: string;
  headers: Record<string, string>;
  /** The variable the key came from, for error messages. */
  keyVariable: string;
  /** The key itself, only to scrub it from anything echoed back. */
  key: string;
  provider: string;
  /** What the key must be, for a refused key's message. */
  keyKind: string;
  retry?: Partial<RetryOptions>;
  /** The longest Retry-After to wait for (default MAX_RETRY_AFTER_MS; tests shorten it). */
  maxRetryAfterMs?: number;
}

export interface RetryOptions {
  /** Attempts per page in all (the first included). */
  attempts: number;
  firstDelayMs: number;
  maxDelayMs: number;
  timeoutMs: number;
}

export const DEFAULT_RETRY: RetryOptions = { attempts: 5, firstDelayMs: 1_000, maxDelayMs: 30_000, timeoutMs: 30_000 };

/** The longest Retry-After meter waits for (a provider may ask for more than the backoff's
 *  30 s); asked for longer, the run fails now and the next one tries again. */
export const MAX_RETRY_AFTER_MS = 10 * 60_000;

/** Sent with every admin API request. */
export const USER_AGENT = `meter/${process.env.npm_package_version ?? '0.1.0'} (usage reconciliation)`;

/** A provider error the user acts on: one line, exit 1; nothing from the run is stored as complete. */
export class ProviderApiError extends MeterError {
  override name = 'ProviderApiError';
}

/** Query values: arrays are sent as `name[]=a&name[]=b`, as the official SDKs send them. */
export type Query = Record<string, string | number | string[] | undefined>;

export function queryString(query: Query): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v === undefined) continue;
    if (Array.isArray(v)) for (const item of v) params.append(`${k}[]`, item);
    else params.append(k, String(v));
  }
  return params.toString();
}

/** The most text one page may hold (a month of daily buckets, grouped by model, project and
 *  key, is far below); past it the page is refused unread. */
export const MAX_PAGE_BYTES = 16 * 1024 * 1024;
/** The most text all the pages of one report may hold together. */
export const MAX_REPORT_BYTES = 128 * 1024 * 1024;
/** Redirects followed within the configured origin. */
const MAX_REDIRECTS = 5;

/** Every page of a cursor-paginated report (`has_more`, `next_page`, sent back as `page`). */
export async function getAllPages<T>(api: AdminApi, path: string, query: Query, maxPages = 1_000): Promise<T[]> {
  const pages: T[] = [];
  const read = { bytes: 0 };
  let page: string | undefined;
  for (let i = 0; i < maxPages; i++) {
    const body = (await getJson(api, path, { ...query, page }, read)) as T & {
      has_more?: unknown;
      next_page?: unknown;
    };
    pages.push(body);
    if (body.has_more !== true) return pages;
    if (typeof body.next_page !== 'string' || body.next_page === '' || body.next_page === page) {
      throw new ProviderApiError(
        `${api.provider} ${path} said has_more but gave no new next_page: the report is incomplete`,
      );
    }
    page = body.next_page;
  }
  throw new ProviderApiError(`${api.provider} ${path} returned more than ${maxPages} pages: the report is incomplete`);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Seconds or an HTTP date, as ms from now; undefined when absent or unreadable. */
export function retryAfterMs(value: string | undefined, now = Date.now()): number | undefined {
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value.trim())) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

async function getJson(api: AdminApi, path: string, query: Query, read: { bytes: number }): Promise<unknown> {
  const retry = { ...DEFAULT_RETRY, ...api.retry };
  const qs = queryString(query);
  const url = `${api.baseUrl.replace(/\/+$/, '')}${path}${qs ? `?${qs}` : ''}`;
  const scrub = (text: string) => (api.key ? text.split(api.key).join('***') : text);
  let last = '';
  for (let attempt = 1; attempt <= retry.attempts; attempt++) {
    let status: number;
    let text: string;
    let retryAfter: string | undefined;
    try {
      const res = await fetchWithin(api, url, path, retry.timeoutMs);
      status = res.status;
      retryAfter = res.headers.get('retry-after') ?? undefined;
      text = await readBounded(res, `${api.provider} ${path}`, Math.min(MAX_PAGE_BYTES, MAX_REPORT_BYTES - read.bytes));
      read.bytes += text.length;
    } catch (err) {
      if (err instanceof ProviderApiError) throw err;
      status = 0;
      text = '';
      last = scrub(
        (err as Error).name === 'TimeoutError'
          ? `no answer within ${retry.timeoutMs} ms`
          : String((err as Error).message),
      );
    }
    if (status >= 200 && status < 300) {
      try {
        return JSON.parse(text);
      } catch {
        throw new ProviderApiError(`${api.provider} ${path} answered ${status} with a body that is not JSON`);
      }
    }
    const message = providerMessage(text, scrub);
    const said = status ? `HTTP ${status}${message ? `: ${message}` : ''}` : last;
    if (status === 401 || status === 403) {
      throw new ProviderApiError(
        `${api.provider} refused ${api.keyVariable} (${said}): it must be ${api.keyKind}, not an ordinary API key`,
      );
    }
    // 408: the provider timed the request out; like 429 and 5xx it is worth another attempt.
    if (status !== 0 && status !== 408 && status !== 429 && status < 500) {
      throw new ProviderApiError(`${api.provider} ${path} answered ${said}`);
    }
    last = said;
    if (attempt === retry.attempts) break;
    const backoff = Math.min(retry.firstDelayMs * 2 ** (attempt - 1), retry.maxDelayMs);
    const asked = retryAfterMs(retryAfter);
    const bound = api.maxRetryAfterMs ?? MAX_RETRY_AFTER_MS;
    if (asked !== undefined && asked > bound) {
      throw new ProviderApiError(
        `${api.provider} ${path} answered ${said} and asked to retry after ${Math.ceil(asked / 1000)} s, longer than meter waits (${bound / 1000} s); nothing was stored as complete, the next run tries again`,
      );
    }
    await sleep(Math.max(asked ?? backoff, 0));
  }
  throw new ProviderApiError(
    `${api.provider} ${path} still failing after ${retry.attempts} attempts (${last}); nothing was stored as complete`,
  );
}

/** A GET with the admin key that follows redirects only within the configured origin: fetch
 *  would carry a custom header such as `x-api-key` to any host a redirect names. */
async function fetchWithin(api: AdminApi, url: string, path: string, timeoutMs: number): Promise<Response> {
  const origin = new URL(api.baseUrl).origin;
  const signal = AbortSignal.timeout(timeoutMs);
  let at = url;
  for (let hop = 0; ; hop++) {
    const res = await fetch(at, { headers: { 'user-agent': USER_AGENT, ...api.headers }, signal, redirect: 'manual' });
    if (res.status < 300 || res.status >= 400 || res.status === 304) return res;
    await res.body?.cancel();
    const location = res.headers.get('location');
    const next = location === null ? undefined : parseUrl(location, at);
    if (!next)
      throw new ProviderApiError(
        `${api.provider} ${path} answered a redirect (HTTP ${res.status}) without a usable Location`,
      );
    if (next.origin !== origin)
      throw new ProviderApiError(
        `${api.provider} ${path} redirected to another origin (${next.origin}, HTTP ${res.status}): ${api.keyVariable} is sent only to ${origin}, so the redirect was not followed; set METER_UPSTREAM_${api.provider.toUpperCase()} to where the admin API is`,
      );
    if (hop === MAX_REDIRECTS)
      throw new ProviderApiError(`${api.provider} ${path} redirected more than ${MAX_REDIRECTS} times`);
    at = next.href;
  }
}

function parseUrl(text: string, base: string): URL | undefined {
  try {
    return new URL(text, base);
  } catch {
    return undefined;
  }
}

/** The body's text, refused past `limit` bytes (by Content-Length at once, else as it arrives). */
async function readBounded(res: Response, what: string, limit: number): Promise<string> {
  const tooBig = () =>
    new ProviderApiError(
      `${what} answered a page over ${limit} bytes (pages are bounded to ${MAX_PAGE_BYTES}, a report to ${MAX_REPORT_BYTES}): the report is refused`,
    );
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (declared > limit) {
    await res.body?.cancel();
    throw tooBig();
  }
  if (!res.body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    size += chunk.byteLength;
    if (size > limit) {
      await res.body.cancel().catch(() => {});
      throw tooBig();
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The provider's own error message from its error body (OpenAI and Anthropic shapes), one line,
 *  scrubbed of the key before it is cut to 300 characters (cut first, a key's head would stay). */
function providerMessage(text: string, scrub: (text: string) => string): string | undefined {
  try {
    const body = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    const m = typeof body.error === 'object' ? body.error?.message : (body.error ?? body.message);
    return typeof m === 'string' ? scrub(m).replace(/\s+/g, ' ').slice(0, 300) : undefined;
  } catch {
    return undefined;
  }
}
