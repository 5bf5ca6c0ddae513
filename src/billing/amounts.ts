/**
 * Billing's money, exact: metered cost in units of 1e-8 USD (the store's NUMERIC(20,8)), a markup
 * of up to 4 decimals, so a marked-up amount is exact in units of 1e-14 USD; Stripe's values are
 * whole micro-dollars (1e-6 USD), rounded half up. Never a float.
 */
import { formatFixed } from '../pricing/decimal.js';

/** Decimals of a marked-up amount: 8 of cost, 4 of the markup, 2 of the percent. */
export const BILLED_SCALE = 14;
const MARKUP_SCALE = 4;
const MICRO_PER_BILLED_UNIT = 10n ** BigInt(BILLED_SCALE - 6);

const DECIMAL = /^(\d+)(?:\.(\d+))?$/;

/** A non-negative decimal string as an integer count of 10^-scale; undefined when it has more decimals. */
export function toScaled(text: string, scale: number): bigint | undefined {
  const m = DECIMAL.exec(text.trim());
  if (!m) return undefined;
  const frac = (m[2] ?? '').replace(/0+$/, '');
  if (frac.length > scale) return undefined;
  return BigInt(m[1]!) * 10n ** BigInt(scale) + BigInt(frac.padEnd(scale, '0') || '0');
}

/** Plain decimal text of a count of 10^-scale, without trailing zeros ("12.5", "0"). */
export function formatScaled(units: bigint, scale: number): string {
  return formatFixed(units, scale)
    .replace(/(\.\d*?)0+$/, '$1')
    .replace(/\.$/, '');
}

/** `--markup-pct`: 0 to 10000 with up to 4 decimals; normalised text, or undefined when invalid. */
export function parseMarkupPct(text: string): string | undefined {
  const units = /^\d{1,5}(\.\d{1,4})?$/.test(text.trim()) ? toScaled(text, MARKUP_SCALE) : undefined;
  if (units === undefined || units > 10_000n * 10n ** BigInt(MARKUP_SCALE)) return undefined;
  return formatScaled(units, MARKUP_SCALE);
}

/** cost (a store decimal, ≤ 8 dp) × (1 + markup ÷ 100), exact, in units of 1e-14 USD. */
export function markedUp(cost: string, markupPct: string): bigint {
  const c = toScaled(cost, 8);
  const m = toScaled(markupPct, MARKUP_SCALE);
  if (c === undefined || m === undefined) throw new Error(`not an amount and a markup: ${cost}, ${markupPct}`);
  return c * (100n * 10n ** BigInt(MARKUP_SCALE) + m);
}

/** Units of 1e-14 USD to whole micro-dollars, half up (amounts are never negative). */
export const toMicrosHalfUp = (billed: bigint): bigint => (billed + MICRO_PER_BILLED_UNIT / 2n) / MICRO_PER_BILLED_UNIT;

/** Exact decimal text of a marked-up amount (units of 1e-14 USD). */
export const formatBilled = (billed: bigint): string => formatScaled(billed, BILLED_SCALE);

/** Micro-dollars as USD text: 1234567 → "1.234567". */
export const formatMicros = (micros: bigint): string => formatScaled(micros, 6);

/**
 * The Stripe value of the next item of a link's month: the month's marked-up total rounded once,
 * less what its earlier items were given. So the fraction each rounding leaves is carried
 * forward, and the month's values add up to its total rounded once.
 */
export function nextMicros(
  carry: { billed: bigint; micros: bigint },
  billed: bigint,
): { micros: bigint; carry: { billed: bigint; micros: bigint } } {
  const total = carry.billed + billed;
  const rounded = toMicrosHalfUp(total);
  return { micros: rounded - carry.micros, carry: { billed: total, micros: rounded } };
}
