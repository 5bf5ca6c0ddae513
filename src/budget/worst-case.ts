import { findCatalogueModel } from '../pricing/catalogue.js';
import type { Pricer } from '../pricing/index.js';
import { getProvider } from '../providers/index.js';
import { topLevelStringField } from '../providers/scan.js';
import type { ProviderSlug } from '../providers/types.js';
import { toUnits } from '../money.js';

/** Output tokens assumed when a request sets no max_tokens and the model's window is unknown. */
export const DEFAULT_WORST_OUTPUT_TOKENS = 32_768;
/** Bytes of request body per input token, on the safe side (English runs ~4 bytes a token). */
const BYTES_PER_TOKEN = 3;
/** Choices counted at most (providers refuse far fewer; this keeps the figures finite). */
const MAX_CHOICES = 1_000_000;

export interface PricedCall {
  provider: ProviderSlug;
  path: string;
  /** The request body when it was read whole (bounded); undefined when it was too large. */
  body: Buffer | undefined;
  /** The body's length in bytes (at least what was read when it was not read whole). */
  bodyBytes: number;
  /** The first bytes of a body too large to read whole (where `model` usually is). */
  head?: Buffer;
  time: Date;
}

/**
 * The most a call can cost, in units of 1e-8 USD: its input (from the body's size) and its output
 * limit times the choices asked for. `undefined` when the call names a model that cannot be
 * found at all (a body too large to read whole without `model` in its first bytes): the caller
 * must then assume the worst. 0 for a call that names no model (it can cost nothing);
 * `unpriced` for a model meter has no price for (nothing bounds it).
 */
export function worstCaseUnits(pricer: Pricer, call: PricedCall): WorstCost {
  return priceWorstCase(pricer, call, worstCaseTokens(call));
}

export type WorstCost = bigint | 'unpriced' | undefined;

/** worstCaseUnits, from the call's worst-case tokens already read (one parse of the body). */
export function priceWorstCase(pricer: Pricer, call: PricedCall, worst: ReturnType<typeof worstCaseTokens>): WorstCost {
  if (worst === undefined) return undefined;
  if (worst.model === undefined) return 0n;
  const { cost, unpriced } = pricer.cost({
    provider: call.provider,
    model: worst.model,
    usage: {
      inputTokens: worst.inputTokens,
      outputTokens: worst.outputTokens,
      cachedInputTokens: 0,
      cacheWriteTokens: 0,
      cacheWrite1hTokens: 0,
      reasoningTokens: 0,
    },
    time: call.time,
  });
  return unpriced ? 'unpriced' : toUnits(cost);
}

/**
 * The most tokens a call can use: its input (from the body's size) and its output limit. The
 * same `undefined` as worstCaseUnits; `model` undefined for a call that names no model (then
 * no tokens are counted).
 */
export function worstCaseTokens(
  call: PricedCall,
): { model: string | undefined; inputTokens: number; outputTokens: number } | undefined {
  const provider = getProvider(call.provider);
  const whole = call.body !== undefined;
  let parsed: unknown;
  if (call.body) {
    try {
      parsed = JSON.parse(call.body.toString('utf8'));
    } catch {
      parsed = undefined;
    }
  }
  let model = provider?.requestModel({ path: call.path, body: parsed });
  if (!model && !whole && call.bodyBytes > 0) {
    // Too large to parse: the model is a top-level key, which SDKs send first.
    model = (call.head && topLevelStringField(call.head.toString('latin1'), 'model')) || undefined;
    if (!model) return undefined;
  }
  if (!model) return { model: undefined, inputTokens: 0, outputTokens: 0 };
  // A body read whole is estimated at 3 bytes a token; one that was not, at a token per byte,
  // which no tokenizer exceeds.
  const inputTokens = whole ? Math.ceil(call.bodyBytes / BYTES_PER_TOKEN) : call.bodyBytes;
  const window = findCatalogueModel(call.provider, model)?.context_window;
  const limit = maxOutputTokens(parsed);
  const perChoice = limit ?? (window ? Math.max(1, window - (whole ? inputTokens : 0)) : DEFAULT_WORST_OUTPUT_TOKENS);
  // Every choice is billed its own output; the prompt is billed once.
  return { model, inputTokens, outputTokens: perChoice * choices(parsed) };
}

/** The number of choices (completions, candidates) the request asks for, in every provider's
 *  spelling: `n` (OpenAI-compatible), `candidateCount` (Gemini), `num_generations` (Cohere). */
export function choices(body: unknown): number {
  if (!body || typeof body !== 'object') return 1;
  const b = body as Record<string, unknown>;
  const gen = (b.generationConfig ?? b.generation_config ?? b.config) as Record<string, unknown> | undefined;
  const candidates = [
    b.n,
    b.num_generations,
    gen && typeof gen === 'object' ? (gen.candidateCount ?? gen.candidate_count) : undefined,
  ];
  for (const c of candidates)
    if (typeof c === 'number' && Number.isFinite(c) && c > 1) return Math.min(MAX_CHOICES, Math.ceil(c));
  return 1;
}

/** The request's own output limit, in every provider's spelling. */
export function maxOutputTokens(body: unknown): number | undefined {
  if (!body || typeof body !== 'object') return undefined;
  const b = body as Record<string, unknown>;
  const gen = b.generationConfig ?? b.generation_config ?? (b.config as Record<string, unknown> | undefined);
  const candidates = [
    b.max_completion_tokens,
    b.max_output_tokens,
    b.max_tokens,
    b.maxTokens,
    gen && typeof gen === 'object'
      ? ((gen as Record<string, unknown>).maxOutputTokens ?? (gen as Record<string, unknown>).max_output_tokens)
      : undefined,
  ];
  for (const c of candidates) if (typeof c === 'number' && Number.isFinite(c) && c > 0) return Math.ceil(c);
  return undefined;
}
