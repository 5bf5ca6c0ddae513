import { openAICompatible } from './openai-compatible.js';

/** OpenAI: chat completions, legacy completions, responses and embeddings (shape-detected). */
export const openai = openAICompatible({ slug: 'openai', defaultBaseUrl: 'https://api.openai.com/v1' });
