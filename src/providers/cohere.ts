import {
  bodyModel,
  isErrorBody,
  isNum,
  num,
  obj,
  parse,
  TextAccumulator,
  usage,
  usageResult,
  type Obj,
} from './common.js';
import { eachStringField, firstStringField } from './scan.js';
import type { Provider, RequestInfo, StreamAccumulator, Usage, UsageResult } from './types.js';

/**
 * Cohere bills on `billed_units`, not `tokens` (which counts the prompt template too). v1 puts
 * them in `meta`, v2 chat in `usage` (rerank in `meta` in both); the inner shape is the same.
 * `search_units` are rerank searches (one query with up to 100 documents), billed per search.
 * `cached_tokens` is not mapped: Cohere prices no cache discount and billed input is what is charged.
 */
export function cohereUsage(u: Obj): Usage | undefined {
  const b = obj(u.billed_units);
  if (!b || (!isNum(b.input_tokens) && !isNum(b.output_tokens) && !isNum(b.search_units))) return undefined;
  return usage({
    inputTokens: num(b.input_tokens),
    outputTokens: num(b.output_tokens),
    units: { rerank_searches: num(b.search_units) },
  });
}

/** Stream events whose text is generated output (v1 NDJSON `event_type`, v2 SSE `type`). */
const TEXT_EVENTS = new Map<string, readonly string[]>([
  ['text-generation', ['text']],
  ['content-delta', ['text', 'thinking']],
  ['tool-plan-delta', ['tool_plan']],
  ['tool-call-delta', ['arguments']],
  ['tool-calls-chunk', ['text']],
]);

class CohereAccumulator extends TextAccumulator {
  private last: Usage | undefined;
  private error = false;

  constructor(private readonly requested: string | undefined) {
    super();
  }

  onEvent(data: string, event?: string): void {
    const type = event ?? firstStringField(data, 'event_type') ?? firstStringField(data, 'type');
    if (type === undefined) return;
    const keys = TEXT_EVENTS.get(type);
    if (keys) {
      for (const k of keys) eachStringField(data, k, this.text);
      return;
    }
    if (type === 'stream-end') {
      // v1: `response.meta.billed_units`; finish_reason ERROR* means the generation failed
      const o = parse(data);
      const meta = obj(obj(o?.response)?.meta);
      const u = meta && cohereUsage(meta);
      if (u) this.last = u;
      const fr = o?.finish_reason;
      if (typeof fr === 'string' && fr.startsWith('ERROR')) this.error = true;
    } else if (type === 'message-end') {
      // v2: `delta.usage.billed_units`, `delta.error` on failure
      const d = obj(parse(data)?.delta);
      const uo = obj(d?.usage);
      const u = uo && cohereUsage(uo);
      if (u) this.last = u;
      if (typeof d?.error === 'string' && d.error !== '') this.error = true;
    }
  }

  result(): UsageResult {
    // Cohere responses name no model: the requested one is all there is
    return usageResult(this.requested, this.last, this.error);
  }
}

export const cohere: Provider = {
  slug: 'cohere',
  defaultBaseUrl: 'https://api.cohere.com/v1',
  catalogueId: 'cohere',
  focus: { name: 'Cohere', service: 'Cohere API' },
  otelName: 'cohere',
  requestModel: bodyModel,
  usageFromJson(body: unknown, req: RequestInfo): UsageResult {
    const o = obj(body);
    const model = bodyModel(req);
    if (!o) return usageResult(model, undefined);
    const src = obj(o.usage) ?? obj(o.meta); // v2 chat / v1 chat, embed, rerank
    // Cohere's error body is `{"id"?, "message": "…"}`; a v2 answer's `message` is an object
    const error = isErrorBody(o) || (!src && typeof o.message === 'string' && o.text === undefined);
    return usageResult(model, src && cohereUsage(src), error);
  },
  streamAccumulator(req: RequestInfo): StreamAccumulator {
    return new CohereAccumulator(bodyModel(req));
  },
};
