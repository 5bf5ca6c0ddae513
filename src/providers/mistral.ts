import { openAICompatible } from './openai-compatible.js';

/** Mistral: OpenAI's shape; usage rides on the last content chunk of a stream. */
export const mistral = openAICompatible({
  slug: 'mistral',
  defaultBaseUrl: 'https://api.mistral.ai/v1',
  catalogueId: 'mistral',
  focus: { name: 'Mistral AI', service: 'Mistral AI API' },
  otelName: 'mistral_ai',
});
