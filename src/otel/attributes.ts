/**
 * A finished call as OpenTelemetry GenAI semantic conventions name it (gen_ai.*), plus meter's
 * own attributes (meter.*). Pure functions, no OpenTelemetry import: loaded only with export on.
 */
import type { CallStart, ResponseInfo } from '../metering/types.js';
import type { UsageEvent } from '../metering/event.js';
import { getProvider } from '../providers/index.js';

/** The GenAI semantic conventions meter follows: their version and schema URL (set on the
 *  tracer and the meter). Attribute names and values below are that version's. */
export const SEMCONV_VERSION = '1.41.0';
export const SCHEMA_URL = `https://opentelemetry.io/schemas/${SEMCONV_VERSION}`;

/** gen_ai.provider.name: the provider's `otelName` (the registry's value where it lists one). */
export const providerName = (slug: string) => getProvider(slug)?.otelName ?? slug;

/** gen_ai.operation.name from the provider path the call went to. */
export function operationName(path: string): string {
  if (/embed/i.test(path)) return 'embeddings';
  if (/:(stream)?generateContent/i.test(path)) return 'generate_content';
  if (/(^|\/)completions$/.test(path) && !/chat\/completions$/.test(path)) return 'text_completion';
  return 'chat';
}

export type Attributes = Record<string, string | number | boolean | string[]>;

/** The upstream a provider's calls go to (server.address, server.port). */
export interface Server {
  address: string;
  port: number;
}

/** The usage is known: the provider reported it (an estimate is meter's, not the provider's). */
export const usageKnown = (event: UsageEvent) => event.usageSource === 'provider';

export function spanAttributes(
  event: UsageEvent,
  call: CallStart,
  response: ResponseInfo,
  server: Server | undefined,
): Attributes {
  const a: Attributes = {
    ...commonAttributes(event, call, server),
    'gen_ai.request.stream': event.stream,
    'http.response.status_code': event.status,
    'meter.event_id': event.id,
    'meter.account': call.principal.accountName,
    'meter.account_id': event.accountId,
    'meter.key_id': event.keyId,
    'meter.cost_usd': Number(event.cost),
    'meter.usage_source': event.usageSource,
    'meter.price_version': event.priceVersion,
  };
  // Usage only when there is some (a provider error reports none): never a made-up 0.
  if (event.usageSource !== 'none') {
    a['gen_ai.usage.input_tokens'] = event.inputTokens;
    a['gen_ai.usage.output_tokens'] = event.outputTokens;
    a['gen_ai.usage.cache_read.input_tokens'] = event.cachedInputTokens;
    a['gen_ai.usage.cache_creation.input_tokens'] = event.cacheWriteTokens;
    a['gen_ai.usage.reasoning.output_tokens'] = event.reasoningTokens;
  }
  if (response.id !== undefined) a['gen_ai.response.id'] = response.id;
  if (response.finishReasons?.length) a['gen_ai.response.finish_reasons'] = response.finishReasons;
  if (event.stream && event.ttfbMs !== null) a['gen_ai.response.time_to_first_chunk'] = event.ttfbMs / 1000;
  if (event.unpriced) a['meter.unpriced'] = true;
  for (const [k, v] of Object.entries(event.tags)) a[`meter.tag.${k}`] = v;
  return a;
}

/** What spans and metrics share: the operation, provider, models, upstream, OpenAI's service
 *  tier and, on failure, error.type. */
function commonAttributes(
  event: UsageEvent,
  call: CallStart,
  server: Server | undefined,
  model: (provider: string, model: string) => string = (_p, m) => m,
): Attributes {
  const a: Attributes = {
    'gen_ai.operation.name': operationName(call.path),
    'gen_ai.provider.name': providerName(event.provider),
    'gen_ai.response.model': model(event.provider, event.model),
  };
  if (event.requestedModel !== null) a['gen_ai.request.model'] = model(event.provider, event.requestedModel);
  if (server) {
    a['server.address'] = server.address;
    a['server.port'] = server.port;
  }
  if (event.provider === 'openai' && event.serviceTier) a['openai.response.service_tier'] = event.serviceTier;
  if (event.status >= 400) a['error.type'] = String(event.status);
  return a;
}

/** The attributes metrics carry: few and bounded (no account, key, tag or event id; models
 *  through `model`, src/metrics/model-label.ts, so made-up names share one value). */
export function metricAttributes(
  event: UsageEvent,
  call: CallStart,
  server: Server | undefined,
  model?: (provider: string, model: string) => string,
): Attributes {
  return commonAttributes(event, call, server, model);
}
