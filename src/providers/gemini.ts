import { isErrorBody, isNum, num, obj, parse, str, TextAccumulator, usage, usageResult, type Obj } from './common.js';
import { eachStringField } from './scan.js';
import type { Provider, RequestInfo, StreamAccumulator, Usage, UsageResult } from './types.js';

/**
 * Gemini: promptTokenCount already includes cachedContentTokenCount; thoughts are billed as
 * output, so output = candidates + thoughts. Tool-use prompt tokens (search / URL context
 * results fed back to the model) are counted apart from the prompt and billed as input.
 */
export function geminiUsage(m: Obj): Usage | undefined {
  if (!isNum(m.promptTokenCount) && !isNum(m.candidatesTokenCount) && !isNum(m.totalTokenCount)) {
    return undefined;
  }
  const thoughts = num(m.thoughtsTokenCount);
  return usage({
    inputTokens: num(m.promptTokenCount) + num(m.toolUsePromptTokenCount),
    outputTokens: num(m.candidatesTokenCount) + thoughts,
    cachedInputTokens: num(m.cachedContentTokenCount),
    reasoningTokens: thoughts,
  });
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

function responseModel(o: Obj | undefined): string | undefined {
  const v = str(o?.modelVersion);
  return v?.startsWith('models/') ? v.slice(7) : v;
}

class GeminiAccumulator extends TextAccumulator {
  /** Every chunk repeats the running totals: only the last one is kept, parsed at the end. */
  private lastUsageEvent: string | undefined;
  private parsed: UsageResult | undefined;
  private error = false;

  constructor(private readonly requested: string | undefined) {
    super();
  }

  onEvent(data: string): void {
    if (data.charCodeAt(0) !== 0x7b) return;
    this.parsed = undefined;
    if (data.includes('"usageMetadata"')) this.lastUsageEvent = data;
    if (data.includes('"error"') && parse(data)?.error !== undefined) this.error = true;
    eachStringField(data, 'text', this.text);
  }

  result(): UsageResult {
    if (this.parsed) return this.parsed;
    const o = this.lastUsageEvent === undefined ? undefined : parse(this.lastUsageEvent);
    const m = obj(o?.usageMetadata);
    this.parsed = usageResult(responseModel(o) ?? this.requested, m && geminiUsage(m), this.error);
    return this.parsed;
  }
}

export const gemini: Provider = {
  slug: 'gemini',
  defaultBaseUrl: 'https://generativelanguage.googleapis.com',
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
    return usageResult(model, m && geminiUsage(m), isErrorBody(o));
  },
  streamAccumulator(req: RequestInfo): StreamAccumulator {
    return new GeminiAccumulator(geminiPathModel(req.path));
  },
};
