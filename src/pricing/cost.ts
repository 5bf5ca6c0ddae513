import { coefAt, divRoundHalfEven, formatFixed, pow10, type Dec, type Ratio } from './decimal.js';
import type { Usage } from '../providers/types.js';
import type { CompiledModel, PriceEntry, PriceSet, ResolvedModel, TieredDec } from './types.js';
import {
  leafPlan,
  PRICE_CLASSES,
  SUPER_UNITS,
  UNITS,
  unitLeaves,
  unitTotals,
  type LeafPlan,
  type PriceClass,
} from './units.js';

/** Costs are stored as NUMERIC(20,8): rounded once, half-even, to this many decimals. */
export const COST_DECIMALS = 8;
/** Prices are per million tokens: tokens × price is 10^6 times too large. */
const PER_MTOK_DIGITS = 6;
/** The design's unit: tokens × (price in 1e-9 $/MTok) = 1e-15 USD. Finer prices widen it. */
const MIN_PRICE_SCALE = 9;

export const ZERO_COST = formatFixed(0n, COST_DECIMALS);

/**
 * The catalogue's rule (genai-prices `calcPrice`), kept identical so dated and time-of-day
 * prices select the same entry: walk from the last entry back, the first entry with no
 * constraint or a matching one wins; nothing matches → the first entry.
 */
export function selectEntry(model: CompiledModel, time: Date): PriceEntry {
  const entries = model.entries;
  const first = entries[0];
  if (!first) throw new Error(`model ${model.id} has no prices`);
  if (entries.length === 1 && first.constraint === undefined) return first;
  const ms = time.getTime();
  if (Number.isNaN(ms)) return first;
  const secOfDay = (((ms / 1000) % 86400) + 86400) % 86400;
  for (let i = entries.length - 1; i >= 0; i--) {
    const e = entries[i]!;
    const c = e.constraint;
    if (c === undefined) return e;
    if (c.type === 'start_date') {
      if (ms >= c.atMs) return e;
    } else if (c.endS < c.startS) {
      if (secOfDay >= c.startS || secOfDay < c.endS) return e;
    } else if (secOfDay >= c.startS && secOfDay < c.endS) {
      return e;
    }
  }
  return first;
}

/** Long-context tiers re-price the whole class once the request's input exceeds the threshold. */
export function tierPrice(t: TieredDec, totalInputTokens: number): Dec {
  let price = t.base;
  for (const tier of t.tiers) if (totalInputTokens > tier.start) price = tier.price;
  return price;
}

/** The price that applies to a class: its own, else that of the nearest class containing it
 *  (cache read → input, 1-hour write → cache write → input). */
export function classPrice(prices: PriceSet, cls: PriceClass): { price: TieredDec; from: PriceClass } | undefined {
  const own = prices[cls];
  if (own) return { price: own, from: cls };
  const sups = SUPER_UNITS[cls];
  for (let i = sups.length - 1; i >= 0; i--) {
    const p = prices[sups[i]!];
    if (p) return { price: p, from: sups[i]! };
  }
  return undefined;
}

const plans = new WeakMap<PriceSet, LeafPlan>();
/** Computed once per price set: the per-call work is then subtraction only. */
function planOf(prices: PriceSet): LeafPlan {
  let p = plans.get(prices);
  if (!p) {
    p = leafPlan(PRICE_CLASSES.filter((k) => prices[k] !== undefined));
    plans.set(prices, p);
  }
  return p;
}

/**
 * Splits usage into the disjoint quantities a model's prices bill, by class (the catalogue's
 * rule: a class without a price of its own stays inside the class that contains it).
 */
export function splitUsage(usage: Usage, prices?: PriceSet): Map<PriceClass, number> {
  const plan = prices ? planOf(prices) : leafPlan(PRICE_CLASSES.filter((c) => c !== 'request'));
  return unitLeaves(unitTotals(usage), plan);
}

/**
 * Exact cost in units of 1e-8 USD: every billed unit × its price summed exactly, a service tier's
 * multiplier applied to the token part, a discount to the whole, rounded once, half-even.
 */
export function costUnits(resolved: ResolvedModel, usage: Usage, time: Date, tier?: Ratio): bigint {
  const { num, den } = costFraction(resolved, usage, time, tier);
  return divRoundHalfEven(num, den);
}

/** The same cost before rounding, num/den units of 1e-8 USD: costs of many calls (batch
 *  results) are summed as fractions and rounded once. */
export function costFraction(resolved: ResolvedModel, usage: Usage, time: Date, tier?: Ratio): Ratio {
  const { prices } = selectEntry(resolved.model, time);
  const totals = unitTotals(usage);
  const plan = planOf(prices);
  // The leaves (unitLeaves' rule) in a reused record: every call is priced here, and a Map and
  // an array of terms per call were most of its allocations.
  const leaves = LEAVES;
  let scale = MIN_PRICE_SCALE;
  for (const { cls, subs } of plan) {
    let v = totals[cls];
    for (const d of subs) v -= leaves[d];
    leaves[cls] = v > 0 ? v : 0;
    if (v > 0) {
      const price = tierPrice(prices[cls]!, totals.input);
      if (price.scale > scale) scale = price.scale;
    }
  }
  // Sums are in units of 10^-(scale + 6) USD: 1e-15 USD for prices given to 1e-9 $/MTok.
  let tokenSum = 0n;
  let callSum = 0n;
  for (const { cls } of plan) {
    const n = leaves[cls];
    if (n === 0) continue;
    const unit = UNITS[cls];
    // Per-1000 prices (calls) are 1000× a per-million price of the same digits.
    const v = BigInt(n) * (unit.per === 1_000 ? 1000n : 1n) * coefAt(tierPrice(prices[cls]!, totals.input), scale);
    if (unit.tokens) tokenSum += v;
    else callSum += v;
  }
  let den = pow10(scale + PER_MTOK_DIGITS - COST_DECIMALS);
  let num = tokenSum + callSum;
  if (tier && tier.num !== tier.den) {
    num = tokenSum * tier.num + callSum * tier.den;
    den *= tier.den;
  }
  if (resolved.discount) {
    num *= resolved.discount.ratio.num;
    den *= resolved.discount.ratio.den;
  }
  return { num, den };
}

/** costFraction's leaves: written before they are read, within one synchronous call. */
const LEAVES = Object.fromEntries(PRICE_CLASSES.map((c) => [c, 0])) as Record<PriceClass, number>;

export function costString(resolved: ResolvedModel, usage: Usage, time: Date, tier?: Ratio): string {
  return formatFixed(costUnits(resolved, usage, time, tier), COST_DECIMALS);
}

/** One priced unit of a call: its quantity and the price that applied to it (per million
 *  tokens or per thousand calls), before the service tier's multiplier and the discount. */
export interface PricedLine {
  cls: PriceClass;
  quantity: number;
  price: Dec;
  /** The long-context tier that re-priced the class: total input tokens above this. */
  above?: number;
  /** The price entry's time-of-day window (`16:30-00:30`), when the entry has one. */
  window?: string;
}

/** A call's billed units one by one, split and priced as costFraction does (for exports that
 *  show a row per priced unit). Units of quantity 0 are left out. */
export function costLines(resolved: ResolvedModel, usage: Usage, time: Date): PricedLine[] {
  const entry = selectEntry(resolved.model, time);
  const totals = unitTotals(usage);
  const c = entry.constraint;
  const window = c?.type === 'time_of_day' ? `${c.startTime}-${c.endTime}` : undefined;
  const lines: PricedLine[] = [];
  for (const [cls, quantity] of unitLeaves(totals, planOf(entry.prices))) {
    if (quantity === 0) continue;
    const t = entry.prices[cls]!;
    const tier = t.tiers.filter((x) => totals.input > x.start).pop();
    const line: PricedLine = { cls, quantity, price: tier ? tier.price : t.base };
    if (tier) line.above = tier.start;
    if (window) line.window = window;
    lines.push(line);
  }
  return lines;
}
