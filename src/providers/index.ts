import { anthropic } from './anthropic.js';
import { cohere } from './cohere.js';
import { deepseek } from './deepseek.js';
import { gemini } from './gemini.js';
import { groq } from './groq.js';
import { mistral } from './mistral.js';
import { openai } from './openai.js';
import { together } from './together.js';
import type { Provider, ProviderSlug } from './types.js';
import { xai } from './xai.js';

export const providers: Record<ProviderSlug, Provider> = {
  openai, anthropic, groq, gemini, mistral, together, cohere, deepseek, xai,
};

export function getProvider(slug: string): Provider | undefined {
  return Object.hasOwn(providers, slug) ? providers[slug as ProviderSlug] : undefined;
}

export * from './types.js';
export { createFramer, streamFormat, StreamFramer, type StreamFormat } from './framing.js';
