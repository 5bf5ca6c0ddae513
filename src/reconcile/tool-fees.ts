/**
 * What meter charged for a model's web searches on a day: meter adds them to each call's cost,
 * the provider bills them on lines of their own (Anthropic cost_type `web_search`), so the
 * comparison takes them out of the model's cost and holds them against those lines.
 */
import { divRoundHalfEven, pow10 } from '../pricing/decimal.js';
import type { Pricer } from '../pricing/pricer.js';
import type { ProviderSlug } from '../providers/types.js';

/** Units of 1e-8 USD for `searches` web searches of `model` at `date`, or 0 when unpriced. */
export function webSearchCost(
  pricer: Pricer,
  provider: ProviderSlug,
  model: string,
  date: string,
  searches: bigint,
): bigint {
  if (searches <= 0n || searches > BigInt(Number.MAX_SAFE_INTEGER)) return 0n;
  const call = pricer.lines({
    provider,
    model,
    usage: {
      inputTokens: 0,
      outputTokens: 0,
      cachedInputTokens: 0,
      cacheWriteTokens: 0,
      cacheWrite1hTokens: 0,
      reasoningTokens: 0,
      units: { web_searches: Number(searches) },
    },
    time: new Date(`${date}T12:00:00Z`),
  });
  const line = call?.lines.find((l) => l.cls === 'web_search');
  if (!line) return 0n;
  // price is USD per 1,000 searches: searches × price / 1000, in 1e-8 USD, times the discount.
  let num = searches * line.price.coef * pow10(8);
  let den = pow10(line.price.scale) * 1000n;
  if (call!.discount) {
    num *= call!.discount.num;
    den *= call!.discount.den;
  }
  return divRoundHalfEven(num, den);
}
