import { openAICompatible } from './openai-compatible.js';

/** Together: OpenAI's shape (chunks also repeat the text as `choices[].text`, which is not
 *  collected twice: only `delta.content` / `delta.reasoning` are). */
export const together = openAICompatible({
  slug: 'together',
  defaultBaseUrl: 'https://api.together.xyz/v1',
  catalogueId: 'together',
  focus: { name: 'Together AI', service: 'Together AI API' },
  otelName: 'together_ai',
});
