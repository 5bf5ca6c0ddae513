import { openAICompatible } from './openai-compatible.js';

/** Mistral: OpenAI's shape; usage rides on the last content chunk of a stream. */
export const mistral = openAICompatible({ slug: 'mistral', defaultBaseUrl: 'https://api.mistral.ai/v1' });
