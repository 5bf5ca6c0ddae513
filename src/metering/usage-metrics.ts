import type { DaemonMetrics } from '../metrics/registry.js';
import type { MeteringCounters } from './counters.js';
import type { UsageEvent } from './event.js';

const TOKEN_KINDS = ['input', 'output', 'cached_input', 'cache_write', 'reasoning'] as const;
/** Calls by status class: index status / 100 (1xx…5xx), 0 for anything else. */
const CLASSES = ['other', '1xx', '2xx', '3xx', '4xx', '5xx'] as const;

/** One provider (and allow-listed model) series: plain numbers, added to once per event. */
interface Series {
  provider: string;
  model: string;
  calls: Float64Array;
  tokens: Float64Array;
  costUsd: number;
  unpriced: number;
}

/**
 * Calls, tokens and cost from every usage event, for /metrics. Labels stay bounded: the
 * provider slug and the status class, plus `model` only for the models an operator
 * allow-listed (METER_METRICS_MODELS; every other model is `other`). Never an account, key or
 * tag value.
 */
export class UsageMetrics {
  private readonly series = new Map<string, Series>();
  private readonly models: ReadonlySet<string> | undefined;

  constructor(models: readonly string[]) {
    this.models = models.length > 0 ? new Set(models) : undefined;
  }

  record(event: UsageEvent): void {
    const model = this.models ? (this.models.has(event.model) ? event.model : 'other') : '';
    const key = model === '' ? event.provider : `${event.provider}\u0000${model}`;
    let s = this.series.get(key);
    if (!s) {
      s = {
        provider: event.provider,
        model,
        calls: new Float64Array(CLASSES.length),
        tokens: new Float64Array(TOKEN_KINDS.length),
        costUsd: 0,
        unpriced: 0,
      };
      this.series.set(key, s);
    }
    const cls = Math.floor(event.status / 100);
    s.calls[cls >= 1 && cls <= 5 ? cls : 0]!++;
    s.tokens[0]! += event.inputTokens;
    s.tokens[1]! += event.outputTokens;
    s.tokens[2]! += event.cachedInputTokens;
    s.tokens[3]! += event.cacheWriteTokens;
    s.tokens[4]! += event.reasoningTokens;
    s.costUsd += Number(event.cost);
    if (event.unpriced) s.unpriced++;
  }

  register(metrics: DaemonMetrics, counters: MeteringCounters): void {
    const withModel = this.models !== undefined;
    const labels = (s: Series, extra: Record<string, string> = {}) =>
      withModel ? { provider: s.provider, model: s.model, ...extra } : { provider: s.provider, ...extra };
    const names = (...extra: string[]) => (withModel ? ['provider', 'model', ...extra] : ['provider', ...extra]);
    metrics.counter(
      'meter_calls_total',
      'Proxied calls (usage events), by provider and response status class',
      names('status_class'),
      (emit) => {
        for (const s of this.series.values())
          CLASSES.forEach((cls, i) => s.calls[i]! > 0 && emit(labels(s, { status_class: cls }), s.calls[i]!));
      },
    );
    metrics.counter(
      'meter_tokens_total',
      'Tokens metered, by provider and kind (input counts every prompt token, cached ones too; output counts reasoning too)',
      names('kind'),
      (emit) => {
        for (const s of this.series.values()) TOKEN_KINDS.forEach((kind, i) => emit(labels(s, { kind }), s.tokens[i]!));
      },
    );
    metrics.counter('meter_cost_usd_total', 'Cost of metered calls in USD, by provider', names(), (emit) => {
      for (const s of this.series.values()) emit(labels(s), s.costUsd);
    });
    metrics.counter(
      'meter_unpriced_calls_total',
      'Calls no price was found for (recorded at cost 0; add the model to METER_PRICES_FILE)',
      names(),
      (emit) => {
        for (const s of this.series.values()) emit(labels(s), s.unpriced);
      },
    );
    metrics.counter(
      'meter_events_total',
      'Usage events recorded, by where their usage came from (provider, estimated, none)',
      ['usage_source'],
      (emit) => {
        for (const [source, n] of Object.entries(counters.bySource)) emit({ usage_source: source }, n);
      },
    );
    metrics.counter(
      'meter_metering_errors_total',
      'Internal metering failures (each call still got an event, estimated)',
      [],
      (emit) => emit({}, counters.internalErrors),
    );
  }
}
