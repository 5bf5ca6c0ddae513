import { isNum, nonZeroUnits, num, obj } from './common.js';
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
  const tools = obj(u.server_side_tool_usage_details);
  if (tools) {
    const units = nonZeroUnits({ ...base.units, ...searchCalls(tools) });
    if (units) base.units = units;
  }
  return base;
}

/**
 * The server-side search calls xAI bills per call, under genai-prices' names: web search,
 * X search (`social_searches`) and Collections Search, the `file_search` tool (`storage_searches`).
 * xAI counts only the calls that succeeded, which are the billed ones.
 * Live Search's `num_sources_used` is not read: `search_parameters` has been refused with
 * 410 Gone since January 2026, so it is always 0.
 */
function searchCalls(d: Obj) {
  return {
    web_searches: num(d.web_search_calls),
    social_searches: num(d.x_search_calls),
    storage_searches: num(d.file_search_calls),
  };
}

export const xai = openAICompatible({
  slug: 'xai',
  defaultBaseUrl: 'https://api.x.ai/v1',
  catalogueId: 'x-ai',
  focus: { name: 'xAI', service: 'xAI API' },
  otelName: 'x_ai',
  normalise: xaiUsage,
  toolCallsInUsage: true,
});
