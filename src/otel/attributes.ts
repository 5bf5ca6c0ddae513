/**
 * A finished call as OpenTelemetry GenAI semantic conventions name it (gen_ai.*), plus meter's
 * own attributes (meter.*). Pure functions, no OpenTelemetry import: loaded only with export on.
 */
import type { CallStart } from '../metering/types.js';
import type { UsageEvent } from '../metering/event.js';
import { getProvider } from '../providers/index.js';

/** gen_ai.provider.name (and the older gen_ai.system): the provider's `otelName`. */
export const providerName = (slug: string) => getProvider(slug)?.otelName ?? slug;

/** gen_ai.operation.name from the provider path the call went to. */
export function operationName(path: string): string {
  if (/embed/i.test(path)) return 'embeddings';
  if (/:(stream)?generateContent/i.test(path)) return 'generate_content';
  if (/(^|\/)completions$/.test(path) && !/chat\/completions$/.test(path)) return 'text_completion';
  return 'chat';
}

export type Attributes = Record<string, string | number | boolean>;

export function spanAttributes(event: UsageEvent, call: CallStart): Attributes {
  const provider = providerName(event.provider);
  const a: Attributes = {
    'gen_ai.operation.name': operationName(call.path),
    'gen_ai.provider.name': provider,
    'gen_ai.system': provider,
    'gen_ai.response.model': event.model,
    'gen_ai.usage.input_tokens': event.inputTokens,
    'gen_ai.usage.output_tokens': event.outputTokens,
    'gen_ai.usage.cache_read.input_tokens': event.cachedInputTokens,
    'gen_ai.usage.cache_creation.input_tokens': event.cacheWriteTokens,
    'http.response.status_code': event.status,
    'meter.event_id': event.id,
    'meter.account': call.principal.accountName,
    'meter.account_id': event.accountId,
    'meter.key_id': event.keyId,
    'meter.cost_usd': Number(event.cost),
    'meter.usage_source': event.usageSource,
    'meter.reasoning_tokens': event.reasoningTokens,
    'meter.stream': event.stream,
    'meter.price_version': event.priceVersion,
  };
  if (event.requestedModel !== null) a['gen_ai.request.model'] = event.requestedModel;
  if (event.ttfbMs !== null) a['meter.ttfb_ms'] = event.ttfbMs;
  if (event.unpriced) a['meter.unpriced'] = true;
  if (event.status >= 400) a['error.type'] = String(event.status);
  for (const [k, v] of Object.entries(event.tags)) a[`meter.tag.${k}`] = v;
  return a;
}

/** The attributes metrics carry: few and bounded (no account, key, tag or event id; models
 *  through `model`, src/metrics/model-label.ts, so made-up names share one value). */
export function metricAttributes(
  event: UsageEvent,
  call: CallStart,
  model: (provider: string, model: string) => string = (_p, m) => m,
): Attributes {
  const provider = providerName(event.provider);
  const a: Attributes = {
    'gen_ai.operation.name': operationName(call.path),
    'gen_ai.provider.name': provider,
    'gen_ai.response.model': model(event.provider, event.model),
  };
  if (event.requestedModel !== null) a['gen_ai.request.model'] = model(event.provider, event.requestedModel);
  if (event.status >= 400) a['error.type'] = String(event.status);
  return a;
}
