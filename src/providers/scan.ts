/**
 * Cheap look-ups in a JSON text without parsing it: used on every stream event, so that only
 * the few events that can carry usage are JSON-parsed. They rely on one fact of JSON: inside a
 * string value every `"` is escaped (`\"`), so `"key"` followed by `:` can only be a real key.
 */

function isWs(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** Index just after `"key"\s*:\s*` for the occurrence of the key found from `from`, else -1.
 *  `tail` is `key"`: searched without its opening quote, whose many occurrences in JSON would
 *  make every search restart at each one (five times slower here); the quote is checked after. */
function valueStart(data: string, tail: string, from: number): number {
  for (;;) {
    const at = data.indexOf(tail, from + 1) - 1;
    if (at < 0) return -1;
    from = at + 1 + tail.length;
    if (data.charCodeAt(at) !== 0x22 /* " */) continue;
    let i = from;
    while (i < data.length && isWs(data.charCodeAt(i))) i++;
    if (data.charCodeAt(i) === 0x3a /* : */) {
      i++;
      while (i < data.length && isWs(data.charCodeAt(i))) i++;
      return i;
    }
  }
}

/** Does the text hold `"key": {` somewhere (a non-null object value, e.g. `"usage":{…}`)? */
export function hasObjectField(data: string, key: string): boolean {
  const tail = `${key}"`;
  let from = 0;
  for (;;) {
    const v = valueStart(data, tail, from);
    if (v < 0) return false;
    if (data.charCodeAt(v) === 0x7b /* { */) return true;
    from = v;
  }
}

/** Index of the closing quote of a JSON string whose content starts at `start`, -1 if none. */
function stringEnd(data: string, start: number): number {
  let q = data.indexOf('"', start);
  while (q > 0 && data.charCodeAt(q - 1) === 0x5c /* \\ */) {
    let bs = 1; // an odd run of backslashes escapes the quote
    while (data.charCodeAt(q - 1 - bs) === 0x5c) bs++;
    if ((bs & 1) === 0) break;
    q = data.indexOf('"', q + 1);
  }
  return q;
}

function decode(data: string, start: number, end: number): string | undefined {
  const raw = data.slice(start, end);
  if (raw.indexOf('\\') < 0) return raw;
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    return undefined;
  }
}

/** The first string value of `key` in the text, decoded; undefined when absent or not a string. */
export function firstStringField(data: string, key: string): string | undefined {
  const tail = `${key}"`;
  let from = 0;
  for (;;) {
    const v = valueStart(data, tail, from);
    if (v < 0) return undefined;
    if (data.charCodeAt(v) === 0x22) {
      const end = stringEnd(data, v + 1);
      return end < 0 ? undefined : decode(data, v + 1, end);
    }
    from = v;
  }
}

/** Every string value of `key` in the text, decoded, handed to `sink` (empty strings skipped). */
export function eachStringField(data: string, key: string, sink: TextCollector): void {
  const tail = `${key}"`;
  let from = 0;
  for (;;) {
    const v = valueStart(data, tail, from);
    if (v < 0) return;
    if (data.charCodeAt(v) !== 0x22) {
      from = v;
      continue;
    }
    const end = stringEnd(data, v + 1);
    if (end < 0) return;
    if (end > v + 1) {
      const s = decode(data, v + 1, end);
      if (s !== undefined) sink.add(s);
    }
    from = end + 1;
  }
}

function isKey(data: string, start: number, end: number, keys: readonly string[]): boolean {
  const len = end - start;
  for (const k of keys) if (k.length === len && data.startsWith(k, start)) return true;
  return false;
}

/**
 * For each object value of `"container"` (e.g. each choice's `"delta":{…}`), the string values
 * of `keys` at any depth inside it. One search for the container, then a walk of that object
 * only: cheaper than one search of the whole text per key.
 */
export function objectStrings(data: string, container: string, keys: readonly string[], sink: TextCollector): void {
  const tail = `${container}"`;
  let from = 0;
  for (;;) {
    let i = valueStart(data, tail, from);
    if (i < 0) return;
    if (data.charCodeAt(i) !== 0x7b) {
      from = i;
      continue;
    }
    let depth = 0;
    let wanted = false; // the last key read is one of `keys`
    const n = data.length;
    while (i < n) {
      const c = data.charCodeAt(i);
      if (c === 0x22) {
        const end = stringEnd(data, i + 1);
        if (end < 0) return;
        let j = end + 1;
        while (j < n && isWs(data.charCodeAt(j))) j++;
        if (data.charCodeAt(j) === 0x3a) {
          wanted = isKey(data, i + 1, end, keys);
        } else if (wanted && end > i + 1) {
          const s = decode(data, i + 1, end);
          if (s !== undefined) sink.add(s);
        }
        i = end + 1;
        continue;
      }
      if (c === 0x7b || c === 0x5b) depth++;
      else if (c === 0x7d || c === 0x5d) {
        if (--depth === 0) break;
      } else if (c === 0x2c) wanted = false;
      i++;
    }
    from = i + 1;
  }
}

/** Default cap on the text kept per stream for an estimate; beyond it only characters are counted. */
export const MAX_KEPT_TEXT_CHARS = 1 << 20;

/** Generated text of one stream, kept up to a cap so memory stays bounded on huge outputs. */
export class TextCollector {
  /** Recent pieces; they may be slices that keep their whole event string alive, so every
   *  256 of them are joined into one flat string that holds nothing else. */
  private parts: string[] = [];
  private flat: string[] = [];
  private kept = 0;
  private total = 0;

  constructor(private readonly cap = MAX_KEPT_TEXT_CHARS) {}

  add(s: string): void {
    this.total += s.length;
    if (this.kept >= this.cap) return;
    const room = this.cap - this.kept;
    const part = s.length > room ? s.slice(0, room) : s;
    this.parts.push(part);
    this.kept += part.length;
    if (this.parts.length >= 256) this.compact();
  }

  private compact(): void {
    if (this.parts.length > 0) this.flat.push(this.parts.join(''));
    this.parts = [];
  }

  text(): string {
    this.compact();
    if (this.flat.length > 1) this.flat = [this.flat.join('')];
    return this.flat[0] ?? '';
  }

  /** All characters seen, including those past the cap. */
  chars(): number {
    return this.total;
  }
}

/**
 * The string value of `key` in the outermost object of a JSON text that may be cut short (the
 * first bytes of a body too large to parse): keys of nested objects are skipped, so a tool
 * schema's `"model"` property is never taken for the request's. undefined when the key is not
 * among the top-level keys the text holds, or its value is not a string.
 */
export function topLevelStringField(data: string, key: string): string | undefined {
  let i = 0;
  while (i < data.length && isWs(data.charCodeAt(i))) i++;
  if (data.charCodeAt(i) !== 0x7b) return undefined;
  let depth = 0;
  let expectKey = false;
  const n = data.length;
  while (i < n) {
    const c = data.charCodeAt(i);
    if (c === 0x22) {
      const end = stringEnd(data, i + 1);
      if (end < 0) return undefined;
      if (depth === 1 && expectKey) {
        let j = end + 1;
        while (j < n && isWs(data.charCodeAt(j))) j++;
        if (data.charCodeAt(j) === 0x3a && end - i - 1 === key.length && data.startsWith(key, i + 1)) {
          j++;
          while (j < n && isWs(data.charCodeAt(j))) j++;
          if (data.charCodeAt(j) !== 0x22) return undefined;
          const close = stringEnd(data, j + 1);
          return close < 0 ? undefined : decode(data, j + 1, close);
        }
        expectKey = false;
      }
      i = end + 1;
      continue;
    }
    if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth === 1) expectKey = true;
    } else if (c === 0x7d || c === 0x5d) {
      if (--depth === 0) return undefined;
    } else if (c === 0x2c && depth === 1) expectKey = true;
    i++;
  }
  return undefined;
}
