/**
 * Service tiers change the price of the tokens a call used (never of its per-call units such as
 * web searches). The catalogue prices the standard tier only, so the tiers' multipliers are kept
 * here, as exact ratios, from each provider's pricing page:
 * - OpenAI `flex` and `batch` (Batch API results, README "Batch results"): half the standard
 *   price. `priority`: a price list of its
 *   own, a different multiple for each model (gpt-5 2×, gpt-5-mini 1.8×, gpt-4.1 1.75×, …);
 *   models not listed are priced at the standard tier.
 * - Anthropic `batch` (message batches): half price. `priority` is billed through a capacity
 *   commitment, not per token: standard price.
 * - Gemini `flex` and `batch`: half price; `priority`: 1.8× (the catalogue's own note).
 * - Groq `flex`: the on-demand price.
 * A tier not listed here (`default`, `standard`, `auto`, `on_demand`, `scale`, …) is standard.
 */
import type { Ratio } from './decimal.js';
import type { ProviderSlug } from '../providers/types.js';

const r = (num: bigint, den: bigint): Ratio => ({ num, den });
const HALF = r(1n, 2n);

/** OpenAI's priority prices ÷ standard prices, by catalogue model id (exact for input, cached input and output alike). */
const OPENAI_PRIORITY: Readonly<Record<string, Ratio>> = {
  'gpt-5': r(2n, 1n),
  'gpt-5.1': r(2n, 1n),
  'gpt-5-codex': r(2n, 1n),
  'gpt-5-mini': r(9n, 5n),
  'gpt-4.1': r(7n, 4n),
  'gpt-4.1-mini': r(7n, 4n),
  'gpt-4.1-nano': r(2n, 1n),
  'gpt-4o': r(17n, 10n),
  'gpt-4o-mini': r(5n, 3n),
  o3: r(7n, 4n),
  'o4-mini': r(20n, 11n),
};

/** The multiplier of a provider's tier for a model (catalogue id), or undefined: standard price. */
export function serviceTierRatio(provider: ProviderSlug, tier: string | undefined, modelId: string): Ratio | undefined {
  if (!tier) return undefined;
  switch (provider) {
    case 'openai':
      if (tier === 'flex' || tier === 'batch') return HALF;
      if (tier === 'priority') return OPENAI_PRIORITY[modelId];
      return undefined;
    case 'anthropic':
      return tier === 'batch' ? HALF : undefined;
    case 'gemini':
      if (tier === 'flex' || tier === 'batch') return HALF;
      return tier === 'priority' ? r(9n, 5n) : undefined;
    default:
      return undefined;
  }
}

/** "0.5", "1.75", "1.81818182…" for display: the exact ratio as a short decimal. */
export function formatRatio(x: Ratio): string {
  const digits = 8n;
  const scaled = (x.num * 10n ** digits) / x.den;
  const exact = (x.num * 10n ** digits) % x.den === 0n;
  const int = scaled / 10n ** digits;
  const frac = (scaled % 10n ** digits).toString().padStart(Number(digits), '0').replace(/0+$/, '');
  return `${int}${frac ? `.${frac}` : ''}${exact ? '' : '…'}`;
}
