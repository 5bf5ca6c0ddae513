/**
 * Provider registry. How the proxy meters one call:
 * - non-streaming: `provider.usageFromJson(JSON.parse(body), req)`;
 * - streaming: `acc = provider.streamAccumulator(req)`, `framer = createFramer(contentType, acc)`,
 *   `framer.push(chunk)` for every chunk piped to the client, `framer.flush()` at the end (or when
 *   the client goes away), then `acc.result()`;
 * - no usage in the result (or `incomplete`): `estimateUsage(req, acc)` from `./estimate.js`
 *   (imported on its own: loading the tokenizer takes ~150 ms), usage_source "estimated".
 * The model to record is `result.model` (the response's, else the requested one).
 */
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

/** The providers, in the order meter lists them; their slugs (ProviderSlug) are its keys. */
export const providers = {
  openai,
  anthropic,
  groq,
  gemini,
  mistral,
  together,
  cohere,
  deepseek,
  xai,
} satisfies Record<string, Provider>;

/** Every provider's slug, in the registry's order. */
export const PROVIDER_SLUGS = Object.keys(providers) as readonly ProviderSlug[];

export function getProvider(slug: string): Provider | undefined {
  return Object.hasOwn(providers, slug) ? providers[slug as ProviderSlug] : undefined;
}

export * from './types.js';
export { createFramer, streamFormat, StreamFramer, type StreamFormat } from './framing.js';
