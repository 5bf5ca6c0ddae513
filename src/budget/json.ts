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
export const rawOrNull = (text: string | null | undefined): RawNumber | null =>
  text == null ? null : new RawNumber(text);

export type JsonValue =
  RawNumber | string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue | undefined };

/** JSON, key order as given; undefined object members are left out, as JSON.stringify does.
 *  Compact, or indented by `indent` spaces like JSON.stringify's third argument. */
export function stringifyJson(value: JsonValue, indent = 0, depth = 0): string {
  if (value instanceof RawNumber) return value.text;
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  const [open, close, items] = Array.isArray(value)
    ? ['[', ']', value.map((v) => stringifyJson(v, indent, depth + 1))]
    : [
        '{',
        '}',
        Object.entries(value)
          .filter((entry): entry is [string, JsonValue] => entry[1] !== undefined)
          .map(([k, v]) => `${JSON.stringify(k)}:${indent ? ' ' : ''}${stringifyJson(v, indent, depth + 1)}`),
      ];
  if (!indent || items.length === 0) return `${open}${items.join(',')}${close}`;
  const pad = ' '.repeat(indent * (depth + 1));
  return `${open}\n${pad}${items.join(`,\n${pad}`)}\n${' '.repeat(indent * depth)}${close}`;
}
