/**
 * The figures of a provider's report, checked as they are read: a count is a whole number, an
 * amount a bounded decimal below the store's NUMERIC(20,8), a bucket's day one of the days
 * asked for. Anything else is a ProviderApiError naming the report, the field, the value and
 * what is allowed, so the run fails on record instead of storing a wrong figure.
 */
import { AMOUNT_FORM, amountToUnits } from './amount.js';
import { ProviderApiError } from './http.js';

/** Below $10^12: what NUMERIC(20,8) holds. */
const MAX_AMOUNT_UNITS = 10n ** 20n;

const shown = (value: unknown) => {
  const text = typeof value === 'string' ? JSON.stringify(value) : String(value);
  return text.length > 60 ? `${text.slice(0, 60)}…` : text;
};

/** A count (tokens, requests); absent is 0. */
export function count(value: unknown, where: string, field: string): bigint {
  if (value === undefined || value === null) return 0n;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return BigInt(value);
  throw new ProviderApiError(
    `${where}: ${field} ${shown(value)} is not a count (a whole number from 0 to ${Number.MAX_SAFE_INTEGER})`,
  );
}

/** An amount in USD (divided by 10^shift: Anthropic's cents) as 1e-8 units. */
export function amount(value: unknown, shift: number, where: string, field: string): bigint {
  const units = amountToUnits(value, shift);
  if (units === undefined)
    throw new ProviderApiError(`${where}: ${field} ${shown(value)} is not an amount (${AMOUNT_FORM})`);
  if (units >= MAX_AMOUNT_UNITS || -units >= MAX_AMOUNT_UNITS)
    throw new ProviderApiError(`${where}: ${field} ${shown(value)} is not an amount below $1,000,000,000,000`);
  return units;
}

/** The UTC day a bucket starts on, which must be one of [from, to). */
export function bucketDay(instantMs: number, raw: unknown, where: string, from: string, to: string): string {
  const day = Number.isFinite(instantMs) && Math.abs(instantMs) <= 8.64e15 ? new Date(instantMs).toISOString() : '';
  if (day.slice(0, 10) >= from && day.slice(0, 10) < to) return day.slice(0, 10);
  throw new ProviderApiError(
    `${where}: a bucket starts at ${shown(raw)}, not on one of the days asked for (${from} to ${to}, exclusive)`,
  );
}
