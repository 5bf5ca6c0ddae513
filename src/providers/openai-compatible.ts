import {
  bodyModel,
  isErrorBody,
  isNum,
  nonZeroUnits,
  num,
  obj,
  parse,
  pathEndsWith,
  serviceTier,
  str,
  TextAccumulator,
  usage,
  usageResult,
  withResponse,
  type Obj,
} from './common.js';
import { eachStringField, firstStringField, hasObjectField, objectStrings } from './scan.js';
import type {
  ExtraUnit,
  Provider,
  ProviderFacts,
  RequestInfo,
  StreamAccumulator,
  UnitCounts,
  Usage,
  UsageResult,
} from './types.js';

/**
 * OpenAI's usage shapes: chat/legacy completions and embeddings (`prompt_tokens`, …) and the
 * responses and images APIs (`input_tokens`, …). Audio and image tokens are parts of the prompt
 * and completion counts, billed at their own prices. Undefined when the object holds no token
 * counts (e.g. Groq's non-streaming `x_groq.usage`, which is only hardware cache statistics).
 */
export function openAIUsage(u: Obj): Usage | undefined {
  let id: Obj | undefined;
  let od: Obj | undefined;
  let input: number;
  let output: number;
  if (isNum(u.input_tokens) || isNum(u.output_tokens)) {
    id = obj(u.input_tokens_details);
    od = obj(u.output_tokens_details);
    input = num(u.input_tokens);
    output = num(u.output_tokens);
  } else if (isNum(u.prompt_tokens) || isNum(u.completion_tokens)) {
    id = obj(u.prompt_tokens_details);
    od = obj(u.completion_tokens_details);
    input = num(u.prompt_tokens);
    output = num(u.completion_tokens); // embeddings: none
  } else {
    return undefined;
  }
  const p: Partial<Usage> = {
    inputTokens: input,
    outputTokens: output,
    cachedInputTokens: num(id?.cached_tokens),
    cacheWriteTokens: num(id?.cache_write_tokens),
    reasoningTokens: num(od?.reasoning_tokens),
  };
  if (id || od) {
    p.units = {
      input_audio_tokens: num(id?.audio_tokens),
      input_image_tokens: num(id?.image_tokens),
      output_audio_tokens: num(od?.audio_tokens),
      output_image_tokens: num(od?.image_tokens),
    };
  }
  return usage(p);
}

/** Responses API output items billed per call, by the unit genai-prices bills them in. Every
 *  item counts, whatever its status: OpenAI bills per call and does not say a failed one is free. */
const PER_CALL_ITEMS: ReadonlyMap<unknown, ExtraUnit> = new Map<unknown, ExtraUnit>([
  ['web_search_call', 'web_searches'],
  ['file_search_call', 'storage_searches'],
]);

/**
 * The server-side tool calls a response made: responses API `web_search_call` and
 * `file_search_call` output items (the final output lists them all, in `response.completed` for
 * a stream), or one web search for a chat completion asked to search (`web_search_options`, the
 * search models). Counted only on the objects that carry usage, so streams cost one scan at the end.
 */
function toolCalls(o: Obj, req: RequestInfo, mode: Mode): UnitCounts | undefined {
  const output = obj(o.response)?.output ?? o.output;
  if (Array.isArray(output)) {
    let calls: UnitCounts | undefined;
    for (const item of output) {
      const unit = PER_CALL_ITEMS.get(obj(item)?.type);
      if (unit) (calls ??= {})[unit] = (calls[unit] ?? 0) + 1;
    }
    return calls;
  }
  return mode === 'chat' && obj(req.body)?.web_search_options !== undefined ? { web_searches: 1 } : undefined;
}

export interface CompatOptions extends ProviderFacts {
  /** Provider rules on top of OpenAI's (xAI reasoning, DeepSeek cache hits). */
  normalise?: (u: Obj) => Usage | undefined;
  /** Another place a body or chunk may carry usage, tried after `usage` (Groq `x_groq.usage`). */
  extraUsage?: (o: Obj) => unknown;
  /** A chunk-level error besides `error` (Groq `x_groq.error`). */
  extraError?: (o: Obj) => boolean;
  /** The usage object counts the billed tool calls itself (xAI): output items, which include
   *  failed attempts, and request options are not counted. */
  toolCallsInUsage?: boolean;
}

type Mode = 'chat' | 'completions' | 'responses';

function modeOf(req: RequestInfo): Mode {
  if (pathEndsWith(req, 'responses')) return 'responses';
  if (pathEndsWith(req, 'completions') && !pathEndsWith(req, 'chat/completions')) return 'completions';
  return 'chat';
}

/** Usage of a body or chunk, with the service tier it reports and its billed tool calls. */
function usageIn(o: Obj, opts: CompatOptions, req: RequestInfo, mode: Mode): Usage | undefined {
  const norm = opts.normalise ?? openAIUsage;
  let u = obj(o.usage);
  let n = u && norm(u);
  if (!n) {
    u = obj(obj(o.response)?.usage);
    n = u && norm(u);
  }
  if (!n && opts.extraUsage) {
    u = obj(opts.extraUsage(o));
    n = u && norm(u);
  }
  if (!n) return undefined;
  const tier = serviceTier(o.service_tier ?? obj(o.response)?.service_tier);
  if (tier !== undefined) n.serviceTier = tier;
  if (!opts.toolCallsInUsage) {
    const calls = toolCalls(o, req, mode);
    const units = calls ? nonZeroUnits({ ...n.units, ...calls }) : n.units && nonZeroUnits(n.units);
    if (units) n.units = units;
  }
  return n;
}

/** Why each choice stopped (chat and legacy completions), or the Responses API's reason for an
 *  incomplete answer. */
function finishReasons(o: Obj): unknown[] {
  if (Array.isArray(o.choices)) return o.choices.map((c) => obj(c)?.finish_reason);
  const r = obj(o.response) ?? o;
  return [obj(r.incomplete_details)?.reason];
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

/** A chat stream's events are kept unread up to this many characters: their text is needed only
 *  for an estimate, which a stream that ends with its usage never makes. Past it, they are read
 *  as they come (memory stays bounded on long outputs). */
const DEFERRED_CHARS = 64 * 1024;

class CompatAccumulator extends TextAccumulator {
  private model: string | undefined;
  private scannedModel: string | undefined;
  private responseId: string | undefined;
  private readonly finish: string[] = [];
  private last: Usage | undefined;
  private error = false;
  /** Chat events whose text has not been collected yet (undefined: collected as they come). */
  private deferred: string[] | undefined;
  private deferredChars = 0;

  constructor(
    private readonly opts: CompatOptions,
    private readonly mode: Mode,
    private readonly req: RequestInfo,
    private readonly requested: string | undefined,
  ) {
    super();
    // Collecting a chat delta's text changes nothing but the text: it can wait.
    if (mode === 'chat') this.deferred = [];
  }

  onEvent(data: string, event?: string): void {
    if (data.charCodeAt(0) !== 0x7b /* { */) return; // `[DONE]`, keep-alives
    if (this.scannedModel === undefined) this.scannedModel = firstStringField(data, 'model');
    if (this.responseId === undefined) this.responseId = firstStringField(data, 'id');
    // A choice's last chunk names its finish reason; the others carry null.
    if (data.includes('"finish_reason":"')) {
      const reason = firstStringField(data, 'finish_reason');
      if (reason !== undefined) this.finish.push(reason);
    }
    // A mid-stream error is its own event, `{"error":…}` (responses: `error` / `response.failed`)
    if (data.startsWith('{"error"') || event === 'error' || event === 'response.failed') this.error = true;
    // Only events that can carry usage are parsed; usage is replaced, never summed.
    if (hasObjectField(data, 'usage')) {
      const o = parse(data);
      if (o) {
        if (hasError(o, this.opts)) this.error = true;
        const u = usageIn(o, this.opts, this.req, this.mode);
        if (u) {
          this.last = u;
          this.model = modelIn(o) ?? this.model;
          const reason = obj(obj(o.response)?.incomplete_details)?.reason;
          if (typeof reason === 'string') this.finish.push(reason);
        }
      }
    }
    const deferred = this.deferred;
    if (deferred && this.deferredChars + data.length <= DEFERRED_CHARS) {
      deferred.push(data);
      this.deferredChars += data.length;
      return;
    }
    this.collectDeferred();
    this.collect(data, event);
  }

  /** The kept events' text, in their order; from then on text is collected as it comes. */
  private collectDeferred(): void {
    const deferred = this.deferred;
    if (!deferred) return;
    this.deferred = undefined;
    for (const data of deferred) this.collect(data, undefined);
  }

  override streamedText(): string {
    this.collectDeferred();
    return super.streamedText();
  }

  override streamedChars(): number {
    this.collectDeferred();
    return super.streamedChars();
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
    const r = usageResult(this.model ?? this.scannedModel ?? this.requested, this.last, this.error);
    return withResponse(r, this.responseId, this.finish);
  }
}

/** A chat-completions-compatible provider: OpenAI itself and the five that copy its API. */
export function openAICompatible(opts: CompatOptions): Provider {
  return {
    slug: opts.slug,
    defaultBaseUrl: opts.defaultBaseUrl,
    catalogueId: opts.catalogueId,
    focus: opts.focus,
    otelName: opts.otelName,
    requestModel: bodyModel,
    usageFromJson(body: unknown, req: RequestInfo): UsageResult {
      const o = obj(body);
      const model = (o && modelIn(o)) ?? bodyModel(req);
      if (!o) return usageResult(model, undefined);
      const r = usageResult(model, usageIn(o, opts, req, modeOf(req)), isErrorBody(o) || opts.extraError?.(o) === true);
      return withResponse(r, o.id ?? obj(o.response)?.id, finishReasons(o));
    },
    streamAccumulator(req: RequestInfo): StreamAccumulator {
      return new CompatAccumulator(opts, modeOf(req), req, bodyModel(req));
    },
  };
}
