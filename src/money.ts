/**
 * Money, exact: USD amounts as bigint counts of 1e-8 USD (NUMERIC(20,8) units, never floats, so
 * "is spend at 80% of the budget" is decided exactly), and JSON with money written as numbers
 * from their exact decimal text (CONTRACT §4: never through a float). A leaf: budgets,
 * analytics, alerts and the CLI all write money here.
 */

// ---- amounts in units of 1e-8 USD ----

const SCALE = 8;
const ONE = 10n ** BigInt(SCALE);
const DECIMAL_RE = /^(\d+)(?:\.(\d+))?$/;

/** Units of a non-negative decimal string with at most 8 decimals ("12.5", "0.00000001"). */
export function toUnits(decimal: string): bigint {
  const fixed = fixedUnits(decimal);
  if (fixed !== undefined) return fixed;
  const m = DECIMAL_RE.exec(decimal.trim());
  if (!m || (m[2] ?? '').replace(/0+$/, '').length > SCALE) throw new Error(`not a USD amount: ${decimal}`);
  const frac = (m[2] ?? '').slice(0, SCALE).padEnd(SCALE, '0');
  return BigInt(m[1]!) * ONE + BigInt(frac);
}

/** Units of a cost as events write it, 8 decimals exactly ("0.00012345"), read digit by digit
 *  (every event's cost is read back on the hot path); undefined for any other text. Up to 15
 *  digits, so the count is exact in a double. */
function fixedUnits(text: string): bigint | undefined {
  const dot = text.length - SCALE - 1;
  if (dot < 1 || dot > 7 || text.charCodeAt(dot) !== 0x2e /* . */) return undefined;
  let units = 0;
  for (let i = 0; i < text.length; i++) {
    if (i === dot) continue;
    const digit = text.charCodeAt(i) - 0x30;
    if (digit < 0 || digit > 9) return undefined;
    units = units * 10 + digit;
  }
  return BigInt(units);
}

/** Plain decimal text without trailing zeros: "12.5", "0", "0.00000001". */
export function formatUnits(units: bigint): string {
  const sign = units < 0n ? '-' : '';
  const abs = units < 0n ? -units : units;
  const int = abs / ONE;
  const frac = (abs % ONE).toString().padStart(SCALE, '0').replace(/0+$/, '');
  return frac ? `${sign}${int}.${frac}` : `${sign}${int}`;
}

/** A normalised decimal string: "12.50000000" → "12.5". */
export const normaliseUsd = (decimal: string): string => formatUnits(toUnits(decimal));

/** Utilisation in percent, truncated to 2 decimals ("99.99", never rounded up to "100"), so the
 *  shown figure never claims a level that was not crossed. */
export function utilizationPct(spend: bigint, budget: bigint): string {
  if (budget <= 0n) throw new Error('budget must be positive');
  const hundredths = (spend * 10_000n) / budget;
  const int = hundredths / 100n;
  const frac = (hundredths % 100n).toString().padStart(2, '0').replace(/0+$/, '');
  return frac ? `${int}.${frac}` : `${int}`;
}

/** true when spend has reached `level` percent of the budget (exactly). */
export const reached = (spend: bigint, budget: bigint, level: number): boolean =>
  spend * 100n >= budget * BigInt(level);

/** The largest budget NUMERIC(20,8) holds: 12 integer digits. */
const MAX_USD_RE = /^\d{1,12}(?:\.\d{1,8})?$/;

/** Validates a user-given budget; returns the normalised decimal or undefined. */
export function parseBudgetUsd(input: string): string | undefined {
  const text = input.trim();
  if (!MAX_USD_RE.test(text)) return undefined;
  const units = toUnits(text);
  return units > 0n ? formatUnits(units) : undefined;
}

/** num/den rounded to the nearest integer, ties to even (banker's rounding). num >= 0, den > 0. */
export function divRoundHalfEven(num: bigint, den: bigint): bigint {
  const q = num / den;
  const r2 = (num % den) * 2n;
  if (r2 > den) return q + 1n;
  if (r2 < den) return q;
  return q % 2n === 0n ? q : q + 1n;
}

// ---- JSON numbers written from exact decimal text ----

/** A JSON number written exactly as its digits (Node 20 has no JSON.rawJSON). `new RawNumber`
 *  keeps the text as given; `RawNumber.money` and `RawNumber.integer` normalise store values. */
export class RawNumber {
  constructor(readonly text: string) {
    if (!/^-?\d+(?:\.\d+)?$/.test(text)) throw new Error(`not a JSON number: ${text}`);
  }

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

/** The decimal text as given (a normalised amount: "12.5"). */
export const raw = (text: string): RawNumber => new RawNumber(text);
export const rawOrNull = (text: string | null | undefined): RawNumber | null =>
  text == null ? null : new RawNumber(text);
/** A store decimal, normalised (see RawNumber.money). */
export const money = (value: string): RawNumber => RawNumber.money(value);
export const integer = (value: string | number): RawNumber => RawNumber.integer(value);

export type JsonValue =
  RawNumber | string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue | undefined };

/** Like JSON.stringify for plain data, with RawNumber written as its digits: key order as
 *  given, undefined object members left out, compact or indented by `indent` spaces. A number
 *  that is not finite is refused (JSON.stringify would write null). */
export function stringifyJson(value: JsonValue, indent = 0, depth = 0): string {
  if (value instanceof RawNumber) return value.text;
  if (value === null || typeof value !== 'object') {
    if (typeof value === 'number' && !Number.isFinite(value)) throw new Error(`not a finite number: ${value}`);
    return JSON.stringify(value);
  }
  const items: string[] = [];
  let open = '[';
  let close = ']';
  if (Array.isArray(value)) {
    for (const v of value) items.push(stringifyJson(v, indent, depth + 1));
  } else {
    open = '{';
    close = '}';
    const colon = indent ? ': ' : ':';
    for (const k of Object.keys(value)) {
      const v = value[k];
      if (v !== undefined) items.push(`${JSON.stringify(k)}${colon}${stringifyJson(v, indent, depth + 1)}`);
    }
  }
  if (!indent || items.length === 0) return `${open}${items.join(',')}${close}`;
  const pad = ' '.repeat(indent * (depth + 1));
  return `${open}\n${pad}${items.join(`,\n${pad}`)}\n${' '.repeat(indent * depth)}${close}`;
}
