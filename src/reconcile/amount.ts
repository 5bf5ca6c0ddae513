/** Exact provider amounts as bigint units of 1e-8 USD (NUMERIC(20,8)), signed formatting. */

const DECIMAL_RE = /^(-)?(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d{1,3}))?$/;

/** The form every outside amount must fit before it is parsed: the work of parsing it is then
 *  bounded (an exponent of -30000000 would ask for a number of 30 million digits). */
export const AMOUNT_FORM = 'a decimal of at most 40 characters, exponent within ±40';
const MAX_AMOUNT_CHARS = 40;
const MAX_EXPONENT = 40;

/**
 * A decimal (string, or a JSON number through its shortest round-trip text) divided by
 * 10^shift (Anthropic's cents: shift 2), rounded once, half to even, to 8 decimals.
 * Undefined when it is not a number of AMOUNT_FORM.
 */
export function amountToUnits(value: unknown, shift = 0): bigint | undefined {
  if (typeof value === 'number' && !Number.isFinite(value)) return undefined;
  if (typeof value !== 'number' && typeof value !== 'string') return undefined;
  const text = String(value).trim();
  if (text.length > MAX_AMOUNT_CHARS) return undefined;
  const m = DECIMAL_RE.exec(text);
  if (!m || (m[2] === '' && (m[3] ?? '') === '')) return undefined;
  if (Math.abs(Number(m[4] ?? 0)) > MAX_EXPONENT) return undefined;
  const digits = BigInt(`${m[2] || '0'}${m[3] ?? ''}`);
  // value = digits × 10^(exp − fraction length − shift); units = value × 10^8
  const scale = 8 + Number(m[4] ?? 0) - (m[3] ?? '').length - shift;
  let units: bigint;
  if (scale >= 0) units = digits * 10n ** BigInt(scale);
  else {
    const div = 10n ** BigInt(-scale);
    const q = digits / div;
    const r = digits % div;
    units = r * 2n > div || (r * 2n === div && q % 2n === 1n) ? q + 1n : q;
  }
  return m[1] ? -units : units;
}

/** "12.5", "-0.00000001", "0": plain decimal text of units. */
export function formatUnits(units: bigint): string {
  const sign = units < 0n ? '-' : '';
  const abs = units < 0n ? -units : units;
  const frac = (abs % 100_000_000n).toString().padStart(8, '0').replace(/0+$/, '');
  return `${sign}${abs / 100_000_000n}${frac ? `.${frac}` : ''}`;
}

/** a ÷ b × 100 as text with 2 decimals, truncated toward zero; null when b is 0. */
export function percentOf(a: bigint, b: bigint): string | null {
  if (b === 0n) return null;
  const hundredths = (a * 10_000n) / b;
  const sign = hundredths < 0n ? '-' : '';
  const abs = hundredths < 0n ? -hundredths : hundredths;
  return `${sign}${abs / 100n}.${(abs % 100n).toString().padStart(2, '0')}`;
}

export const abs = (n: bigint): bigint => (n < 0n ? -n : n);

/** Money inside a finding's extras: written as an exact JSON number of USD. */
export class Usd {
  constructor(readonly units: bigint) {}
}
