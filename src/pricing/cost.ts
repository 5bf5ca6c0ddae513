import { coefAt, divRoundHalfEven, formatFixed, type Dec } from './decimal.js';
import type { Usage } from '../providers/types.js';
import {
  PRICE_CLASSES, PRICE_PARENT,
  type CompiledModel, type PriceClass, type PriceEntry, type PriceSet, type ResolvedModel, type TieredDec,
} from './types.js';

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

/** The price that applies to a class: its own, else its parent's (cache read → input, …). */
export function classPrice(prices: PriceSet, cls: PriceClass): { price: TieredDec; from: PriceClass } | undefined {
  for (let c: PriceClass | null = cls; c !== null; c = PRICE_PARENT[c]) {
    const p = prices[c];
    if (p) return { price: p, from: c };
  }
  return undefined;
}

/** Whole non-negative token counts; anything else a provider might send counts as 0. */
function tokens(n: number | undefined): number {
  if (n === undefined || !Number.isFinite(n) || n <= 0) return 0;
  return Math.min(Math.round(n), Number.MAX_SAFE_INTEGER);
}

/**
 * Splits normalised usage into disjoint token classes. Inconsistent counts (more cached than
 * input, a 1h part larger than all writes) are clamped rather than rejected: metering never throws.
 */
export function splitUsage(usage: Usage): Record<PriceClass, number> {
  const input = tokens(usage.inputTokens);
  const cacheRead = Math.min(tokens(usage.cachedInputTokens), input);
  const cacheWrite = Math.min(tokens(usage.cacheWriteTokens), input - cacheRead);
  const cacheWrite1h = Math.min(tokens(usage.cacheWrite1hTokens), cacheWrite);
  return {
    input: input - cacheRead - cacheWrite,
    cache_read: cacheRead,
    cache_write: cacheWrite - cacheWrite1h,
    cache_write_1h: cacheWrite1h,
    output: tokens(usage.outputTokens),
  };
}

/** Exact cost in units of 1e-8 USD: every class summed exactly, rounded once, half-even. */
export function costUnits(resolved: ResolvedModel, usage: Usage, time: Date): bigint {
  const { prices } = selectEntry(resolved.model, time);
  const split = splitUsage(usage);
  const totalInput = tokens(usage.inputTokens);

  const terms: { n: bigint; price: Dec }[] = [];
  let scale = MIN_PRICE_SCALE;
  for (const cls of PRICE_CLASSES) {
    const n = split[cls];
    if (n === 0) continue;
    const p = classPrice(prices, cls);
    if (!p) continue;
    const price = tierPrice(p.price, totalInput);
    if (price.scale > scale) scale = price.scale;
    terms.push({ n: BigInt(n), price });
  }
  // sum is in units of 10^-(scale + 6) USD: 1e-15 USD for prices given to 1e-9 $/MTok.
  let sum = 0n;
  for (const t of terms) sum += t.n * coefAt(t.price, scale);

  let num = sum;
  let den = 10n ** BigInt(scale + PER_MTOK_DIGITS - COST_DECIMALS);
  if (resolved.discount) {
    num *= resolved.discount.ratio.num;
    den *= resolved.discount.ratio.den;
  }
  return divRoundHalfEven(num, den);
}

export function costString(resolved: ResolvedModel, usage: Usage, time: Date): string {
  return formatFixed(costUnits(resolved, usage, time), COST_DECIMALS);
}
