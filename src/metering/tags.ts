import type { IncomingHttpHeaders } from 'node:http';
import { hasUnstorable } from './storable.js';

/** CONTRACT §2: tagging headers. Invalid → the proxy answers 400 `invalid_tags`. */
export const MAX_TAGS = 20;
export const MAX_TAG_VALUE_CHARS = 256;
const KEY_RE = /^[A-Za-z0-9_.-]{1,64}$/;
const KEY_RULE = 'keys are 1-64 characters of A-Z a-z 0-9 _ . -';
const VALUE_RULE = `values are 1-${MAX_TAG_VALUE_CHARS} characters`;

export type ParsedTags = { ok: true; tags: Record<string, string> } | { ok: false; message: string };
/** A Map while parsing, so a key like `__proto__` is a key like any other. */
type Parsed = { ok: true; tags: Map<string, string> } | { ok: false; message: string };

const fail = (message: string): { ok: false; message: string } => ({ ok: false, message });

/** One header value: node joins repeated headers with ", " for most names; an array is possible
 *  for unknown ones when set programmatically. */
function headerValue(v: string | string[] | undefined): string | undefined {
  if (v === undefined) return undefined;
  return Array.isArray(v) ? v.join(',') : v;
}

function checkKey(key: string): string | undefined {
  if (KEY_RE.test(key)) return undefined;
  const shown = key.length > 70 ? `${key.slice(0, 64)}…` : key;
  return `tag key ${JSON.stringify(shown)} is invalid: ${KEY_RULE}`;
}

function checkValue(key: string, value: string): string | undefined {
  if (hasUnstorable(value))
    return `tag ${JSON.stringify(key)} has a NUL or an unpaired surrogate in its value: ${VALUE_RULE} of text`;
  // Characters, not UTF-16 units: an emoji is one character.
  const chars = value.length <= MAX_TAG_VALUE_CHARS ? value.length : [...value].length;
  if (chars >= 1 && chars <= MAX_TAG_VALUE_CHARS) return undefined;
  return `tag ${JSON.stringify(key)} has ${chars === 0 ? 'an empty value' : `a value of ${chars} characters`}: ${VALUE_RULE}`;
}

function parseJsonTags(raw: string): Parsed {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return fail(
      'X-Metering-Tags is not valid JSON: send a JSON object of strings ({"team":"search"}) or key=value pairs separated by commas',
    );
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return fail('X-Metering-Tags JSON must be an object of strings, e.g. {"team":"search"}');
  }
  const tags = new Map<string, string>();
  for (const [key, value] of Object.entries(parsed)) {
    if (typeof value !== 'string') {
      return fail(
        `tag ${JSON.stringify(key)} must be a string, got ${value === null ? 'null' : typeof value}: X-Metering-Tags JSON is an object of strings`,
      );
    }
    tags.set(key, value);
  }
  return { ok: true, tags };
}

function parsePairs(raw: string): Parsed {
  const tags = new Map<string, string>();
  for (const part of raw.split(',')) {
    const pair = part.trim();
    if (pair === '') continue; // tolerate a trailing comma
    const eq = pair.indexOf('=');
    if (eq < 0) {
      return fail(
        `X-Metering-Tags entry ${JSON.stringify(pair.slice(0, 80))} is not key=value: send key=value pairs separated by commas (values percent-encoded) or a JSON object of strings`,
      );
    }
    const key = pair.slice(0, eq).trim();
    let value: string;
    try {
      value = decodeURIComponent(pair.slice(eq + 1).trim());
    } catch {
      return fail(`tag ${JSON.stringify(key)} has a malformed percent-encoding: encode "%" as %25 and "," as %2C`);
    }
    if (tags.has(key)) return fail(`tag ${JSON.stringify(key)} is given twice in X-Metering-Tags`);
    tags.set(key, value);
  }
  return { ok: true, tags };
}

/**
 * Tags of a request: `X-Metering-Tags` (`k=v,k2=v2` with percent-decoded values, or a JSON
 * object of strings), plus `X-Feature-Name` → `feature` and `X-Tenant-ID` → `tenant`, which win
 * over the same keys. At most 20 tags in all; the message says what was wrong and what is allowed.
 */
export function parseTags(headers: IncomingHttpHeaders): ParsedTags {
  const raw = headerValue(headers['x-metering-tags'])?.trim();
  let tags = new Map<string, string>();
  if (raw) {
    const parsed = raw.startsWith('{') ? parseJsonTags(raw) : parsePairs(raw);
    if (!parsed.ok) return parsed;
    tags = parsed.tags;
  }
  const feature = headerValue(headers['x-feature-name']);
  const tenant = headerValue(headers['x-tenant-id']);
  if (feature !== undefined) tags.set('feature', feature.trim());
  if (tenant !== undefined) tags.set('tenant', tenant.trim());

  if (tags.size > MAX_TAGS) return fail(`${tags.size} tags given: at most ${MAX_TAGS} tags are allowed per call`);
  for (const [key, value] of tags) {
    const problem = checkKey(key) ?? checkValue(key, value);
    if (problem) {
      const where =
        key === 'feature' && feature !== undefined
          ? ' (from X-Feature-Name)'
          : key === 'tenant' && tenant !== undefined
            ? ' (from X-Tenant-ID)'
            : '';
      return fail(problem + where);
    }
  }
  // fromEntries defines own properties, so even `__proto__` stays an ordinary key.
  return { ok: true, tags: Object.fromEntries(tags) };
}
