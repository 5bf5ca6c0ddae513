import {
  bodyModel,
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
  withResponse,
  type Obj,
} from './common.js';
import { batchResults, pathId } from './batch-results.js';
import { eachStringField, firstStringField } from './scan.js';
import type { BatchResults, Provider, RequestInfo, StreamAccumulator, Usage, UsageResult } from './types.js';

/**
 * Anthropic's `input_tokens` excludes cache reads and writes: all input = input_tokens +
 * cache_creation_input_tokens + cache_read_input_tokens. `cache_creation` splits the writes by
 * TTL; its 1-hour part is priced higher. `server_tool_use` counts web search and web fetch
 * requests; `service_tier` says `standard`, `priority` or `batch`.
 */
export function anthropicUsage(u: Obj): Usage | undefined {
  if (!isNum(u.input_tokens) && !isNum(u.output_tokens)) return undefined;
  const cc = obj(u.cache_creation);
  const oneHour = num(cc?.ephemeral_1h_input_tokens);
  const writes = isNum(u.cache_creation_input_tokens)
    ? num(u.cache_creation_input_tokens)
    : num(cc?.ephemeral_5m_input_tokens) + oneHour;
  const reads = num(u.cache_read_input_tokens);
  const tools = obj(u.server_tool_use);
  const p: Partial<Usage> = {
    inputTokens: num(u.input_tokens) + writes + reads,
    outputTokens: num(u.output_tokens),
    cachedInputTokens: reads,
    cacheWriteTokens: writes,
    cacheWrite1hTokens: oneHour,
    reasoningTokens: num(obj(u.output_tokens_details)?.thinking_tokens),
  };
  // Server tools are billed per request (web search); web fetch is counted, its tokens billed.
  if (tools) p.units = { web_searches: num(tools.web_search_requests), web_fetches: num(tools.web_fetch_requests) };
  const tier = serviceTier(u.service_tier);
  if (tier !== undefined) p.serviceTier = tier;
  return usage(p);
}

const DELTA_TEXT_KEYS = ['text', 'thinking', 'partial_json'];

class AnthropicAccumulator extends TextAccumulator {
  private model: string | undefined;
  /** message_start's usage: real input and cache counts, placeholder output. */
  private start: Obj | undefined;
  /** The last message_delta's usage: cumulative, final output count. */
  private delta: Obj | undefined;
  private error = false;
  private id: unknown;
  private stopReason: unknown;

  constructor(private readonly requested: string | undefined) {
    super();
  }

  onEvent(data: string, event?: string): void {
    const type = event ?? firstStringField(data, 'type');
    switch (type) {
      case 'content_block_delta':
        for (const k of DELTA_TEXT_KEYS) eachStringField(data, k, this.text);
        return;
      case 'message_start': {
        const m = obj(parse(data)?.message);
        if (!m) return;
        this.model = str(m.model) ?? this.model;
        this.id = m.id ?? this.id;
        this.start = obj(m.usage) ?? this.start;
        return;
      }
      case 'message_delta': {
        const o = parse(data);
        const u = obj(o?.usage);
        if (u) this.delta = u;
        this.stopReason = obj(o?.delta)?.stop_reason ?? this.stopReason;
        return;
      }
      case 'error':
        this.error = true;
        return;
      default:
    }
  }

  result(): UsageResult {
    let merged: Obj | undefined = this.start;
    if (this.delta) {
      // message_delta's non-null fields replace message_start's (never added to them)
      merged = { ...this.start };
      for (const [k, v] of Object.entries(this.delta)) if (v !== null && v !== undefined) merged[k] = v;
    }
    const u = merged && anthropicUsage(merged);
    const r = usageResult(this.model ?? this.requested, u, this.error, this.start !== undefined && !this.delta);
    return withResponse(r, this.id, [this.stopReason]);
  }
}

/** `GET v1/messages/batches/{id}/results`: one line per request, `{custom_id, result}`; only a
 *  `succeeded` result holds a message (errored, canceled and expired ones used nothing). */
const RESULTS_PATH = /(?:^|\/)messages\/batches\/([^/]+)\/results\/?$/;

function messageBatchResults(req: RequestInfo): BatchResults | undefined {
  const id = pathId(req, RESULTS_PATH);
  return id === undefined
    ? undefined
    : batchResults(id, (line) => {
        const result = obj(line.result);
        if (result?.type !== 'succeeded') return undefined;
        const message = obj(result.message);
        const u = obj(message?.usage);
        const found = u && anthropicUsage(u);
        return found && { model: str(message?.model) ?? 'unknown', usage: found };
      });
}

export const anthropic: Provider = {
  slug: 'anthropic',
  defaultBaseUrl: 'https://api.anthropic.com/v1',
  catalogueId: 'anthropic',
  focus: { name: 'Anthropic', service: 'Claude API' },
  otelName: 'anthropic',
  errorShape: 'anthropic',
  requestModel: bodyModel,
  usageFromJson(body: unknown, req: RequestInfo): UsageResult {
    const o = obj(body);
    const model = str(o?.model) ?? bodyModel(req);
    if (!o) return usageResult(model, undefined);
    // count_tokens answers a bare `{input_tokens}` (no `usage`): it bills nothing
    const u = obj(o.usage);
    return withResponse(usageResult(model, u && anthropicUsage(u), isErrorBody(o)), o.id, [o.stop_reason]);
  },
  streamAccumulator(req: RequestInfo): StreamAccumulator {
    return new AnthropicAccumulator(bodyModel(req));
  },
  batchResults: messageBatchResults,
};
