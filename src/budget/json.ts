/**
 * JSON with money written as numbers from their exact decimal text (CONTRACT §4: never through
 * a float). Node 20 has no JSON.rawJSON, so values wrap such text in RawNumber and this small
 * writer emits it verbatim.
 */
export class RawNumber {
  constructor(readonly text: string) {
    if (!/^-?\d+(?:\.\d+)?$/.test(text)) throw new Error(`not a JSON number: ${text}`);
  }
}

export const raw = (text: string): RawNumber => new RawNumber(text);
export const rawOrNull = (text: string | null | undefined): RawNumber | null => (text == null ? null : new RawNumber(text));

export type JsonValue = RawNumber | string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue | undefined };

/** Compact JSON, key order as given; undefined object members are left out, as JSON.stringify does. */
export function stringifyJson(value: JsonValue): string {
  if (value instanceof RawNumber) return value.text;
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(stringifyJson).join(',')}]`;
  const members = Object.entries(value)
    .filter((entry): entry is [string, JsonValue] => entry[1] !== undefined)
    .map(([k, v]) => `${JSON.stringify(k)}:${stringifyJson(v)}`);
  return `{${members.join(',')}}`;
}
