/**
 * JSON text for analytics responses. Money and counters come from the store as exact decimal
 * strings (NUMERIC, INT8, sums of them); they are written into the JSON verbatim as numbers,
 * never through a JS number, so 123456789012.30000001 and 2^53 + 1 stay exact.
 */

/** A JSON number written exactly as its digits. Build it with `money` or `integer`. */
export class RawNumber {
  private constructor(readonly text: string) {}

  /** A decimal string from the store (`12.34500000`, `-0.1`, `0`): trailing fraction zeros and
   *  a bare point are dropped (`12.345`), `-0` becomes `0`. */
  static money(value: string): RawNumber {
    const m = /^(-?)(\d+)(?:\.(\d*))?$/.exec(value);
    if (!m) throw new Error(`not a decimal: ${JSON.stringify(value)}`);
    const int = m[2]!.replace(/^0+(?=\d)/, '');
    const frac = (m[3] ?? '').replace(/0+$/, '');
    const digits = frac ? `${int}.${frac}` : int;
    return new RawNumber(m[1] && digits !== '0' ? `-${digits}` : digits);
  }

  /** An integer string (INT8, or the NUMERIC sum of INT8s). */
  static integer(value: string | number): RawNumber {
    const text = String(value);
    // A NUMERIC sum of integers may come back as `12` or, on some paths, `12.0`.
    const m = /^(-?\d+)(?:\.0*)?$/.exec(text);
    if (!m) throw new Error(`not an integer: ${JSON.stringify(text)}`);
    return RawNumber.money(m[1]!);
  }
}

export const money = (value: string): RawNumber => RawNumber.money(value);
export const integer = (value: string | number): RawNumber => RawNumber.integer(value);

export type JsonValue = RawNumber | string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/** Like JSON.stringify for plain data, with RawNumber written as its digits. */
export function toJson(value: JsonValue): string {
  if (value instanceof RawNumber) return value.text;
  if (value === null || typeof value !== 'object') {
    if (typeof value === 'number' && !Number.isFinite(value)) throw new Error(`not a finite number: ${value}`);
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map(toJson).join(',')}]`;
  const parts: string[] = [];
  for (const [k, v] of Object.entries(value)) parts.push(`${JSON.stringify(k)}:${toJson(v)}`);
  return `{${parts.join(',')}}`;
}
