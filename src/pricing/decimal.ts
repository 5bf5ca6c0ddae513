/**
 * Exact decimal arithmetic for money. A `Dec` is `coef / 10^scale`, never a float.
 * Prices arrive as decimal strings (overrides) or JS numbers (the catalogue); numbers are
 * converted through their shortest round-trip string (`String(n)`), which is the literal the
 * catalogue was written with, so 0.135 stays 0.135 and never becomes 0.13500000000000000888.
 */

export interface Dec {
  coef: bigint;
  scale: number;
}

/** Exact ratio num/den (den > 0), e.g. a discount multiplier (100 - 12.5) / 100. */
export interface Ratio {
  num: bigint;
  den: bigint;
}

export const ZERO: Dec = { coef: 0n, scale: 0 };

const DECIMAL_RE = /^(\d+)?(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;
/** Far beyond any real price; bounds the size of what a prices file can make us compute. */
const MAX_SCALE = 30;
/** The longest text parsed: the digits of a BigInt are bounded before it is made. */
const MAX_CHARS = 64;

/** Parses a non-negative decimal ("0.15", "3", ".5", "1e-7", or a finite number) of at most 64
 *  characters, exponent within ±100. Null if invalid. */
export function parseDecimal(input: string | number): Dec | null {
  let text: string;
  if (typeof input === 'number') {
    if (!Number.isFinite(input) || input < 0) return null;
    text = String(input);
  } else {
    text = input.trim();
  }
  if (text.length > MAX_CHARS) return null;
  const m = DECIMAL_RE.exec(text);
  if (!m || (m[1] === undefined && m[2] === undefined)) return null;
  const intPart = m[1] ?? '';
  const fracPart = m[2] ?? '';
  const exp = m[3] === undefined ? 0 : Number(m[3]);
  if (!Number.isSafeInteger(exp) || Math.abs(exp) > 100) return null;
  let coef = BigInt((intPart + fracPart).replace(/^0+(?=\d)/, '') || '0');
  let scale = fracPart.length - exp;
  if (scale < 0) {
    coef *= 10n ** BigInt(-scale);
    scale = 0;
  }
  const dec = normalise({ coef, scale });
  return dec.scale > MAX_SCALE ? null : dec;
}

/** Drops trailing zeros of the fraction (3.750 → 3.75) so equal values compare equal. */
export function normalise(d: Dec): Dec {
  let { coef, scale } = d;
  while (scale > 0 && coef % 10n === 0n) {
    coef /= 10n;
    scale -= 1;
  }
  return coef === 0n ? ZERO : { coef, scale };
}

/** `d` expressed with `scale` digits after the point (scale >= d.scale). */
export function coefAt(d: Dec, scale: number): bigint {
  return d.coef * pow10(scale - d.scale);
}

const POWERS_OF_TEN: bigint[] = [1n];

/** 10^k (k ≥ 0) from a table: every call is priced with a few of them, and `10n ** BigInt(k)`
 *  allocates and multiplies each time. Far beyond any price's scale it is computed. */
export function pow10(k: number): bigint {
  if (k > 64) return 10n ** BigInt(k);
  for (let i = POWERS_OF_TEN.length; i <= k; i++) POWERS_OF_TEN.push(POWERS_OF_TEN[i - 1]! * 10n);
  return POWERS_OF_TEN[k]!;
}

export function decEquals(a: Dec, b: Dec): boolean {
  const s = Math.max(a.scale, b.scale);
  return coefAt(a, s) === coefAt(b, s);
}

/** Plain decimal text with no trailing zeros: "3.75", "0.003625", "12". */
export function formatDec(d: Dec): string {
  const n = normalise(d);
  if (n.scale === 0) return n.coef.toString();
  const digits = n.coef.toString().padStart(n.scale + 1, '0');
  return `${digits.slice(0, -n.scale)}.${digits.slice(-n.scale)}`;
}

/** `d × ratio`, exact when ratio.den is a power of ten times the caller's choice (see discountRatio). */
export function mulRatioExact(d: Dec, r: Ratio): Dec {
  // den is 10^k for every ratio this module builds, so the product is an exact decimal.
  const k = r.den.toString().length - 1;
  if (10n ** BigInt(k) !== r.den) throw new Error('mulRatioExact needs a power-of-ten denominator');
  return normalise({ coef: d.coef * r.num, scale: d.scale + k });
}

/** The multiplier for a percentage discount: 12.5 → 87.5/100 as 875/1000. */
export function discountRatio(pct: Dec): Ratio {
  const den = 100n * 10n ** BigInt(pct.scale);
  return { num: den - pct.coef, den };
}

export { divRoundHalfEven } from '../money.js';

/** An integer count of 1e-`decimals` units as fixed-point text: (12345n, 8) → "0.00012345". */
export function formatFixed(units: bigint, decimals: number): string {
  const neg = units < 0n;
  const digits = (neg ? -units : units).toString().padStart(decimals + 1, '0');
  const text = `${digits.slice(0, -decimals)}.${digits.slice(-decimals)}`;
  return neg ? `-${text}` : text;
}
