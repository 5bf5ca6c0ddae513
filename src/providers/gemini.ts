import {
  isErrorBody,
  isNum,
  num,
  obj,
  parse,
  serviceTier,
  str,
  TextAccumulator,
  usage,
  usageResult,
  type Obj,
  withResponse,
} from './common.js';
import { eachStringField } from './scan.js';
import type { Provider, RequestInfo, StreamAccumulator, Usage, UsageResult } from './types.js';

/**
 * Gemini: promptTokenCount already includes cachedContentTokenCount; thoughts are billed as
 * output, so output = candidates + thoughts. Tool-use prompt tokens (search / URL context
 * results fed back to the model) are counted apart from the prompt and billed as input.
 * Per-modality details split audio, image (documents too) and video tokens, billed at their own
 * prices; `serviceTier` says flex, standard or priority.
 */
export function geminiUsage(m: Obj): Usage | undefined {
  if (!isNum(m.promptTokenCount) && !isNum(m.candidatesTokenCount) && !isNum(m.totalTokenCount)) {
    return undefined;
  }
  const thoughts = num(m.thoughtsTokenCount);
  const p: Partial<Usage> = {
    inputTokens: num(m.promptTokenCount) + num(m.toolUsePromptTokenCount),
    outputTokens: num(m.candidatesTokenCount) + thoughts,
    cachedInputTokens: num(m.cachedContentTokenCount),
    reasoningTokens: thoughts,
  };
  const prompt = modalities(m.promptTokensDetails, modalities(m.toolUsePromptTokensDetails));
  const cached = modalities(m.cacheTokensDetails);
  const output = modalities(m.candidatesTokensDetails);
  if (prompt || cached || output) {
    p.units = {
      input_audio_tokens: prompt?.AUDIO,
      input_image_tokens: prompt?.IMAGE,
      input_video_tokens: prompt?.VIDEO,
      cache_audio_read_tokens: cached?.AUDIO,
      cache_image_read_tokens: cached?.IMAGE,
      output_audio_tokens: output?.AUDIO,
      output_image_tokens: output?.IMAGE,
      output_video_tokens: output?.VIDEO,
    };
  }
  const tier = serviceTier(m.serviceTier);
  if (tier !== undefined) p.serviceTier = tier;
  return usage(p);
}

type ModalityCounts = Partial<Record<'AUDIO' | 'IMAGE' | 'VIDEO', number>>;

/** `[{modality, tokenCount}]` summed by modality, added to `into`; documents are billed as
 *  images (as the catalogue reads them). Undefined when there is no list. */
function modalities(list: unknown, into?: ModalityCounts): ModalityCounts | undefined {
  if (!Array.isArray(list)) return into;
  const out: ModalityCounts = { ...into };
  for (const x of list) {
    const d = obj(x);
    let k = str(d?.modality);
    if (k === 'DOCUMENT') k = 'IMAGE';
    if (k === 'AUDIO' || k === 'IMAGE' || k === 'VIDEO') out[k] = (out[k] ?? 0) + num(d?.tokenCount);
  }
  return out;
}

/** Grounding with Google Search: the queries the model ran (`groundingMetadata.webSearchQueries`). */
function groundingQueries(o: Obj | undefined): number {
  let n = 0;
  const candidates = o?.candidates;
  if (!Array.isArray(candidates)) return 0;
  for (const c of candidates) {
    const q = obj(obj(c)?.groundingMetadata)?.webSearchQueries;
    if (Array.isArray(q)) n += q.length;
  }
  return n;
}

/** The usage of a response with its grounding queries (they may come in an earlier chunk). */
function withSearches(u: Usage | undefined, searches: number): Usage | undefined {
  if (u && searches > 0) u.units = { ...u.units, web_searches: searches };
  return u;
}

/** `v1beta/models/{model}:generateContent` → `{model}` (also `tunedModels/…`). */
export function geminiPathModel(path: string): string | undefined {
  const m = /(?:^|\/)(?:models|tunedModels)\/([^/:?]+)/.exec(path);
  if (!m?.[1]) return undefined;
  try {
    return decodeURIComponent(m[1]);
  } catch {
    return m[1];
  }
}

/** Each candidate's `finishReason` (`STOP`, `MAX_TOKENS`, …), as Gemini spells it. */
function finishReasons(o: Obj | undefined): unknown[] {
  return Array.isArray(o?.candidates) ? o.candidates.map((c) => obj(c)?.finishReason) : [];
}

function responseModel(o: Obj | undefined): string | undefined {
  const v = str(o?.modelVersion);
  return v?.startsWith('models/') ? v.slice(7) : v;
}

class GeminiAccumulator extends TextAccumulator {
  /** Every chunk repeats the running totals: only the last one is kept, parsed at the end. */
  private lastUsageEvent: string | undefined;
  /** Grounding queries, from the chunk that reported them (parsed only when one mentions them). */
  private searches = 0;
  private parsed: UsageResult | undefined;
  private error = false;

  constructor(private readonly requested: string | undefined) {
    super();
  }

  onEvent(data: string): void {
    if (data.charCodeAt(0) !== 0x7b) return;
    this.parsed = undefined;
    if (data.includes('"usageMetadata"')) this.lastUsageEvent = data;
    if (data.includes('"webSearchQueries"')) this.searches = Math.max(this.searches, groundingQueries(parse(data)));
    if (data.includes('"error"') && parse(data)?.error !== undefined) this.error = true;
    eachStringField(data, 'text', this.text);
  }

  result(): UsageResult {
    if (this.parsed) return this.parsed;
    const o = this.lastUsageEvent === undefined ? undefined : parse(this.lastUsageEvent);
    const m = obj(o?.usageMetadata);
    const r = usageResult(
      responseModel(o) ?? this.requested,
      withSearches(m && geminiUsage(m), this.searches),
      this.error,
    );
    this.parsed = withResponse(r, o?.responseId, finishReasons(o));
    return this.parsed;
  }
}

export const gemini: Provider = {
  slug: 'gemini',
  defaultBaseUrl: 'https://generativelanguage.googleapis.com',
  catalogueId: 'google',
  focus: { name: 'Google', service: 'Gemini API' },
  otelName: 'gcp.gemini',
  requestModel: (req) => geminiPathModel(req.path),
  usageFromJson(body: unknown, req: RequestInfo): UsageResult {
    // streamGenerateContent without alt=sse answers one JSON array of chunks: take the last usage
    let o = obj(body);
    if (Array.isArray(body)) {
      for (let i = body.length - 1; i >= 0 && !o; i--) {
        const c = obj(body[i]);
        if (c?.usageMetadata !== undefined) o = c;
      }
    }
    const model = responseModel(o) ?? geminiPathModel(req.path);
    if (!o) return usageResult(model, undefined);
    const m = obj(o.usageMetadata);
    let searches = groundingQueries(o);
    if (Array.isArray(body)) for (const c of body) searches = Math.max(searches, groundingQueries(obj(c)));
    const r = usageResult(model, withSearches(m && geminiUsage(m), searches), isErrorBody(o));
    return withResponse(r, o.responseId, finishReasons(o));
  },
  streamAccumulator(req: RequestInfo): StreamAccumulator {
    return new GeminiAccumulator(geminiPathModel(req.path));
  },
};
