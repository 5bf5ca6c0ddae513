import {
  bodyModel, isErrorBody, isNum, num, obj, parse, pathEndsWith, str, TextAccumulator, usage, usageResult, type Obj,
} from './common.js';
import { eachStringField, firstStringField, hasObjectField, objectStrings } from './scan.js';
import type { Provider, ProviderSlug, RequestInfo, StreamAccumulator, Usage, UsageResult } from './types.js';

/**
 * OpenAI's usage shapes: chat/legacy completions and embeddings (`prompt_tokens`, …) and the
 * responses API (`input_tokens`, …). Undefined when the object holds no token counts (e.g.
 * Groq's non-streaming `x_groq.usage`, which is only hardware cache statistics).
 */
export function openAIUsage(u: Obj): Usage | undefined {
  if (isNum(u.input_tokens) || isNum(u.output_tokens)) {
    const id = obj(u.input_tokens_details);
    const od = obj(u.output_tokens_details);
    return usage({
      inputTokens: num(u.input_tokens),
      outputTokens: num(u.output_tokens),
      cachedInputTokens: num(id?.cached_tokens),
      cacheWriteTokens: num(id?.cache_write_tokens),
      reasoningTokens: num(od?.reasoning_tokens),
    });
  }
  if (!isNum(u.prompt_tokens) && !isNum(u.completion_tokens)) return undefined;
  const pd = obj(u.prompt_tokens_details);
  const cd = obj(u.completion_tokens_details);
  return usage({
    inputTokens: num(u.prompt_tokens),
    outputTokens: num(u.completion_tokens), // embeddings: none
    cachedInputTokens: num(pd?.cached_tokens),
    cacheWriteTokens: num(pd?.cache_write_tokens),
    reasoningTokens: num(cd?.reasoning_tokens),
  });
}

export interface CompatOptions {
  slug: ProviderSlug;
  defaultBaseUrl: string;
  /** Provider rules on top of OpenAI's (xAI reasoning, DeepSeek cache hits). */
  normalise?: (u: Obj) => Usage | undefined;
  /** Another place a body or chunk may carry usage, tried after `usage` (Groq `x_groq.usage`). */
  extraUsage?: (o: Obj) => unknown;
  /** A chunk-level error besides `error` (Groq `x_groq.error`). */
  extraError?: (o: Obj) => boolean;
}

type Mode = 'chat' | 'completions' | 'responses';

function modeOf(req: RequestInfo): Mode {
  if (pathEndsWith(req, 'responses')) return 'responses';
  if (pathEndsWith(req, 'completions') && !pathEndsWith(req, 'chat/completions')) return 'completions';
  return 'chat';
}

function usageIn(o: Obj, opts: CompatOptions): Usage | undefined {
  const norm = opts.normalise ?? openAIUsage;
  const candidates = [o.usage, obj(o.response)?.usage, opts.extraUsage?.(o)];
  for (const c of candidates) {
    const u = obj(c);
    const n = u && norm(u);
    if (n) return n;
  }
  return undefined;
}

function modelIn(o: Obj): string | undefined {
  return str(o.model) ?? str(obj(o.response)?.model);
}

function hasError(o: Obj, opts: CompatOptions): boolean {
  if (o.error !== undefined && o.error !== null) return true;
  if (o.type === 'error' || o.type === 'response.failed') return true;
  return opts.extraError?.(o) ?? false;
}

/** Generated text in a chat chunk's `delta`: answer, reasoning (DeepSeek/xAI, Groq/Together), tool-call arguments. */
const CHAT_TEXT_KEYS = ['content', 'reasoning_content', 'reasoning', 'arguments'];

class CompatAccumulator extends TextAccumulator {
  private model: string | undefined;
  private scannedModel: string | undefined;
  private last: Usage | undefined;
  private error = false;

  constructor(
    private readonly opts: CompatOptions,
    private readonly mode: Mode,
    private readonly requested: string | undefined,
  ) {
    super();
  }

  onEvent(data: string, event?: string): void {
    if (data.charCodeAt(0) !== 0x7b /* { */) return; // `[DONE]`, keep-alives
    if (this.scannedModel === undefined) this.scannedModel = firstStringField(data, 'model');
    // A mid-stream error is its own event, `{"error":…}` (responses: `error` / `response.failed`)
    if (data.startsWith('{"error"') || event === 'error' || event === 'response.failed') this.error = true;
    // Only events that can carry usage are parsed; usage is replaced, never summed.
    if (hasObjectField(data, 'usage')) {
      const o = parse(data);
      if (o) {
        if (hasError(o, this.opts)) this.error = true;
        const u = usageIn(o, this.opts);
        if (u) {
          this.last = u;
          this.model = modelIn(o) ?? this.model;
        }
      }
    }
    this.collect(data, event);
  }

  private collect(data: string, event: string | undefined): void {
    if (this.mode === 'chat') {
      objectStrings(data, 'delta', CHAT_TEXT_KEYS, this.text);
    } else if (this.mode === 'completions') {
      // legacy `choices[].text`; FIM endpoints (Mistral `fim/completions`) stream chat-like deltas
      const before = this.text.chars();
      eachStringField(data, 'text', this.text);
      if (this.text.chars() === before) objectStrings(data, 'delta', CHAT_TEXT_KEYS, this.text);
    } else {
      // responses: text only from `*.delta` events (`response.completed` repeats the whole output)
      const type = event ?? firstStringField(data, 'type');
      if (type === 'error') this.error = true;
      if (type !== undefined && type.endsWith('.delta') && type !== 'response.audio.delta') {
        eachStringField(data, 'delta', this.text);
      }
    }
  }

  result(): UsageResult {
    return usageResult(this.model ?? this.scannedModel ?? this.requested, this.last, this.error);
  }
}

/** A chat-completions-compatible provider: OpenAI itself and the five that copy its API. */
export function openAICompatible(opts: CompatOptions): Provider {
  return {
    slug: opts.slug,
    defaultBaseUrl: opts.defaultBaseUrl,
    requestModel: bodyModel,
    usageFromJson(body: unknown, req: RequestInfo): UsageResult {
      const o = obj(body);
      const model = (o && modelIn(o)) ?? bodyModel(req);
      if (!o) return usageResult(model, undefined);
      return usageResult(model, usageIn(o, opts), isErrorBody(o) || opts.extraError?.(o) === true);
    },
    streamAccumulator(req: RequestInfo): StreamAccumulator {
      return new CompatAccumulator(opts, modeOf(req), bodyModel(req));
    },
  };
}
