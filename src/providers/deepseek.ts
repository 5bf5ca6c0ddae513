import { isNum, num } from './common.js';
import { openAICompatible, openAIUsage } from './openai-compatible.js';

/** DeepSeek: prompt_tokens = prompt_cache_hit_tokens + prompt_cache_miss_tokens; hits are the
 *  cached part. completion_tokens already includes the reasoner's reasoning tokens. */
export const deepseek = openAICompatible({
  slug: 'deepseek',
  defaultBaseUrl: 'https://api.deepseek.com',
  catalogueId: 'deepseek',
  focus: { name: 'DeepSeek', service: 'DeepSeek API' },
  otelName: 'deepseek',
  normalise(u) {
    const base = openAIUsage(u);
    if (!base) return undefined;
    if (isNum(u.prompt_cache_hit_tokens)) base.cachedInputTokens = num(u.prompt_cache_hit_tokens);
    if (!isNum(u.prompt_tokens) && isNum(u.prompt_cache_miss_tokens)) {
      base.inputTokens = base.cachedInputTokens + num(u.prompt_cache_miss_tokens);
    }
    return base;
  },
});
