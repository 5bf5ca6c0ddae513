import { collectDefaultMetrics, Counter, Gauge, Registry, type Metric } from 'prom-client';

/**
 * The daemon's Prometheus metrics. Nothing here runs on the hot path: the daemon's parts keep
 * plain numbers (counters, FixedHistogram buckets) and register callbacks that read them when
 * /metrics is scraped. One registry per daemon (tests run several in one process); the
 * process metrics are process-wide and registered once.
 */

export type Labels = Record<string, string>;
/** Called at scrape time: report each labelled value through `emit`. */
export type Reader = (emit: (labels: Labels, value: number) => void) => void | Promise<void>;

let processRegistry: Registry | undefined;

/** CPU, memory, event-loop lag, GC, handles: prom-client's default process metrics. */
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

export class DaemonMetrics {
  readonly registry = new Registry();

  /** A monotonically growing count, read from the owner's own number at scrape time. */
  counter(name: string, help: string, labelNames: string[], read: Reader): void {
    new Counter({
      name,
      help,
      labelNames,
      registers: [this.registry],
      async collect() {
        this.reset();
        await read((labels, value) => this.inc(labels, value));
      },
    });
  }

  /** A value that goes up and down, read at scrape time. */
  gauge(name: string, help: string, labelNames: string[], read: Reader): void {
    new Gauge({
      name,
      help,
      labelNames,
      registers: [this.registry],
      async collect() {
        this.reset();
        await read((labels, value) => this.set(labels, value));
      },
    });
  }

  /** Histograms the owner fills itself (FixedHistogram.observe is a bucket increment). */
  histogram(name: string, help: string, read: () => Iterable<[Labels, FixedHistogram]>): void {
    const metric = {
      name,
      help,
      type: 'histogram',
      aggregator: 'sum',
      get: async () => {
        const values: { labels: Labels; value: number; metricName: string }[] = [];
        for (const [labels, h] of read()) h.export(name, labels, values);
        return { name, help, type: 'histogram', aggregator: 'sum', values };
      },
    };
    // prom-client formats any registered object with name, type and get() (its own metrics'
    // shape); a histogram filled from outside has no public constructor.
    this.registry.registerMetric(metric as unknown as Metric);
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The text exposition: this daemon's metrics, then the process's. */
  async scrape(): Promise<string> {
    const [own, proc] = await Promise.all([this.registry.metrics(), processMetrics().metrics()]);
    return own + proc;
  }
}

/** Prometheus histogram with fixed bounds (seconds): observe() is a short scan and two adds. */
export class FixedHistogram {
  private readonly counts: Float64Array;
  private sum = 0;
  private count = 0;

  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length);
  }

  observe(seconds: number): void {
    const b = this.bounds;
    for (let i = 0; i < b.length; i++) {
      if (seconds <= b[i]!) {
        this.counts[i]!++;
        break;
      }
    }
    this.sum += seconds;
    this.count++;
  }

  get observations(): number {
    return this.count;
  }

  /** Cumulative `_bucket` lines, `+Inf`, `_sum` and `_count`, as prom-client's own histograms. */
  export(name: string, labels: Labels, out: { labels: Labels; value: number; metricName: string }[]): void {
    let acc = 0;
    for (let i = 0; i < this.bounds.length; i++) {
      acc += this.counts[i]!;
      out.push({ labels: { ...labels, le: String(this.bounds[i]) }, value: acc, metricName: `${name}_bucket` });
    }
    out.push({ labels: { ...labels, le: '+Inf' }, value: this.count, metricName: `${name}_bucket` });
    out.push({ labels, value: this.sum, metricName: `${name}_sum` });
    out.push({ labels, value: this.count, metricName: `${name}_count` });
  }
}

/** The time the daemon adds: 50 µs to 1 s. */
export const OVERHEAD_BUCKETS = [
  0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1,
];
/** A provider's answer: 10 ms to 5 min. */
export const UPSTREAM_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
