import { FixedHistogram, OVERHEAD_BUCKETS, UPSTREAM_BUCKETS, type DaemonMetrics } from '../metrics/registry.js';
import type { ErrorCode } from '../http.js';

/** One provider's timings, filled by ForwardCall (bucket increments only). */
export interface CallTimings {
  /** Arrival → upstream request sent, plus upstream response head → head to the client: the
   *  X-Meter-Overhead-Ms value. */
  overhead: FixedHistogram;
  /** The same request side, plus upstream head → the first body chunk written to the client:
   *  what the daemon adds to the client's first byte (a stream's time to first token). */
  firstByte: FixedHistogram;
  /** Upstream request sent → the provider's response head. */
  upstream: FixedHistogram;
}

/** The proxy's own numbers: per-provider timings and the calls it refused before forwarding. */
export class ProxyMetrics {
  private readonly timings = new Map<string, CallTimings>();
  private readonly refusals = new Map<ErrorCode, number>();

  constructor(slugs: Iterable<string>) {
    for (const slug of slugs) {
      this.timings.set(slug, {
        overhead: new FixedHistogram(OVERHEAD_BUCKETS),
        firstByte: new FixedHistogram(OVERHEAD_BUCKETS),
        upstream: new FixedHistogram(UPSTREAM_BUCKETS),
      });
    }
  }

  of(slug: string): CallTimings | undefined {
    return this.timings.get(slug);
  }

  refused(code: ErrorCode): void {
    this.refusals.set(code, (this.refusals.get(code) ?? 0) + 1);
  }

  register(metrics: DaemonMetrics, keyCacheAgeSeconds: () => number): void {
    const each = (pick: (t: CallTimings) => FixedHistogram) => () =>
      [...this.timings].map(([provider, t]) => [{ provider }, pick(t)] as [Record<string, string>, FixedHistogram]);
    metrics.histogram(
      'meter_overhead_seconds',
      'Time the daemon adds to a call: arrival to upstream request sent, plus upstream response head to the client (X-Meter-Overhead-Ms)',
      each((t) => t.overhead),
    );
    metrics.histogram(
      'meter_first_byte_overhead_seconds',
      "Time the daemon adds to the first byte of a response body (a stream's first token): arrival to upstream request sent, plus upstream first chunk handling until it is written to the client",
      each((t) => t.firstByte),
    );
    metrics.histogram(
      'meter_upstream_latency_seconds',
      "Upstream request sent to the provider's response head",
      each((t) => t.upstream),
    );
    metrics.counter(
      'meter_refusals_total',
      'Calls the daemon answered itself without forwarding, by reason (rate_limited, quota_exceeded, budget_exceeded, invalid_api_key, invalid_tags, unknown_provider)',
      ['reason'],
      (emit) => {
        for (const [reason, n] of this.refusals) emit({ reason }, n);
      },
    );
    metrics.gauge(
      'meter_key_cache_age_seconds',
      'Seconds since service keys were last re-read from the store (revocations take effect within this)',
      [],
      (emit) => emit({}, keyCacheAgeSeconds()),
    );
  }
}
