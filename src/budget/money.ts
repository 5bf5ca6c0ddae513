/**
 * Exact USD for budgets: amounts are bigint counts of 1e-8 USD (NUMERIC(20,8) units), never
 * floats, so "is spend at 80% of the budget" is decided exactly.
 */

const SCALE = 8;
const ONE = 10n ** BigInt(SCALE);
const DECIMAL_RE = /^(\d+)(?:\.(\d+))?$/;

/** Units of a non-negative decimal string with at most 8 decimals ("12.5", "0.00000001"). */
export function toUnits(decimal: string): bigint {
  const m = DECIMAL_RE.exec(decimal.trim());
  if (!m || (m[2] ?? '').replace(/0+$/, '').length > SCALE) throw new Error(`not a USD amount: ${decimal}`);
  const frac = (m[2] ?? '').slice(0, SCALE).padEnd(SCALE, '0');
  return BigInt(m[1]!) * ONE + BigInt(frac);
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
