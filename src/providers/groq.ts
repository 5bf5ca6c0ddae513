import { obj } from './common.js';
import { openAICompatible } from './openai-compatible.js';

/**
 * Groq streams the same usage up to three times (`x_groq.usage` and `usage` on the finish chunk,
 * then a `choices: []` chunk): the last is taken. In a non-streaming body `x_groq.usage` holds
 * only cache statistics, which carry no token counts and are skipped.
 */
export const groq = openAICompatible({
  slug: 'groq',
  defaultBaseUrl: 'https://api.groq.com/openai/v1',
  catalogueId: 'groq',
  focus: { name: 'Groq', service: 'GroqCloud API' },
  otelName: 'groq',
  extraUsage: (o) => obj(o.x_groq)?.usage,
  extraError: (o) => {
    const e = obj(o.x_groq)?.error;
    return e !== undefined && e !== null;
  },
});
