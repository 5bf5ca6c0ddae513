import { isNum, num } from './common.js';
import { openAICompatible, openAIUsage } from './openai-compatible.js';
import type { Obj } from './common.js';

/** xAI's own cost, 1 tick = 1e-10 USD; kept exact as a bigint. */
function ticks(x: unknown): bigint | undefined {
  if (typeof x === 'number' && Number.isSafeInteger(x) && x >= 0) return BigInt(x);
  if (typeof x === 'string' && /^\d+$/.test(x)) return BigInt(x);
  return undefined;
}

/**
 * xAI: completion_tokens excludes reasoning tokens, so output = completion + reasoning
 * (total_tokens = prompt + completion + reasoning). Should a response ever report
 * total = prompt + completion, reasoning is already inside completion and is not added.
 */
function xaiUsage(u: Obj) {
  const base = openAIUsage(u);
  if (!base) return undefined;
  const prompt = isNum(u.prompt_tokens) ? num(u.prompt_tokens) : num(u.input_tokens);
  const completion = isNum(u.completion_tokens) ? num(u.completion_tokens) : num(u.output_tokens);
  const included = isNum(u.total_tokens) && num(u.total_tokens) === prompt + completion;
  if (base.reasoningTokens > 0 && !included) base.outputTokens = completion + base.reasoningTokens;
  const t = ticks(u.cost_in_usd_ticks);
  if (t !== undefined) base.providerCostTicks = t;
  return base;
}

export const xai = openAICompatible({
  slug: 'xai',
  defaultBaseUrl: 'https://api.x.ai/v1',
  normalise: xaiUsage,
});
