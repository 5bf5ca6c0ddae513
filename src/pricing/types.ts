import type { Dec, Ratio } from './decimal.js';
import type { ProviderSlug, Usage } from '../providers/types.js';

export { PRICE_CLASSES, type PriceClass } from './units.js';
import type { PriceClass } from './units.js';

/** A price in USD per million tokens (per thousand calls); above `tiers[i].start` total input tokens the whole class is re-priced. */
export interface TieredDec {
  base: Dec;
  /** Ascending by start. A tier applies when the request's total input tokens are > start. */
  tiers: { start: number; price: Dec }[];
}

export type PriceSet = Partial<Record<PriceClass, TieredDec>>;

export type PriceConstraint =
  | { type: 'start_date'; startDate: string; atMs: number }
  /** Seconds of the UTC day; end < start wraps around midnight. */
  | { type: 'time_of_day'; startTime: string; endTime: string; startS: number; endS: number };

export interface PriceEntry {
  constraint?: PriceConstraint;
  prices: PriceSet;
}

/** One model's prices, ready for the per-call path: no parsing left to do. */
export interface CompiledModel {
  /** Catalogue model id, or the overrides-file key. */
  id: string;
  /** Checked like the catalogue does: from the last entry back, the first that matches the time wins; else entries[0]. */
  entries: PriceEntry[];
}

export type PriceSource = 'catalogue' | 'override';

/** A model resolved for one provider: the prices and the discount to apply to them. */
export interface ResolvedModel {
  model: CompiledModel;
  source: PriceSource;
  /** Multiplier applied to the summed cost before the single rounding (percentage discount). */
  discount?: { pct: Dec; ratio: Ratio };
  /** For `same_as` overrides: the catalogue model the prices came from. */
  sameAs?: string;
}

export interface CostInput {
  provider: ProviderSlug;
  /** The model the provider reported. */
  model?: string | null;
  /** The model the request asked for: priced when `model` is missing or unpriced. */
  requestedModel?: string | null;
  usage: Usage;
  /** When the call arrived: dated and time-of-day prices use it. */
  time: Date;
}

export interface CostResult {
  /** USD with exactly 8 decimals, e.g. "0.00012345". */
  cost: string;
  unpriced: boolean;
  priceVersion: string;
  /** The catalogue model id or overrides key that priced the call. */
  matchedModel?: string;
  source?: PriceSource;
  /** Which of the two names was priced. */
  pricedModel?: string;
  /** The service tier's multiplier applied to token prices, e.g. "0.5" (absent: none). */
  tierMultiplier?: string;
}
