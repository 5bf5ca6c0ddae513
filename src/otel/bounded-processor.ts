/**
 * A batching span processor that never holds a call up and never grows without bound: ended
 * spans wait in a queue of at most `maxQueueSize` (past it a span is dropped and counted), a
 * batch goes out every `scheduledDelayMs` or when `maxExportBatchSize` are waiting, and only
 * one export is in flight at a time (a collector that accepts and never answers holds one batch
 * until the exporter's own timeout, OTEL_EXPORTER_OTLP_TIMEOUT). A failed export's spans are
 * counted as dropped. Like the SDK's BatchSpanProcessor, with its drops counted for /metrics.
 */
import { PeriodicTask } from '../periodic.js';
import type { Context } from '@opentelemetry/api';
import { ExportResultCode } from '@opentelemetry/core';
import type { ReadableSpan, Span, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-base';

/** The longest a shutdown waits for the collector (a daemon's stop must not hang on it). */
const SHUTDOWN_WAIT_MS = 3_000;

export interface SpanCounts {
  exported: number;
  /** Dropped because the queue was full (a slow or dead collector). */
  droppedQueueFull: number;
  /** Dropped because their export failed (refused, timed out, rejected). */
  droppedExportFailed: number;
}

export interface BoundedOptions {
  maxQueueSize: number;
  maxExportBatchSize: number;
  scheduledDelayMs: number;
  /** Longest an export may take before its spans count as failed and the next may start. */
  exportTimeoutMs: number;
}

/** OTEL_BSP_* as the specification defines them (defaults 2048, 512, 5000 ms, 30000 ms). */
export function bspOptions(env: NodeJS.ProcessEnv = process.env): BoundedOptions {
  const n = (name: string, fallback: number) => {
    const v = Number(env[name]);
    return Number.isInteger(v) && v > 0 ? v : fallback;
  };
  const maxQueueSize = n('OTEL_BSP_MAX_QUEUE_SIZE', 2048);
  return {
    maxQueueSize,
    maxExportBatchSize: Math.min(n('OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512), maxQueueSize),
    scheduledDelayMs: n('OTEL_BSP_SCHEDULE_DELAY', 5000),
    exportTimeoutMs: n('OTEL_BSP_EXPORT_TIMEOUT', 30000),
  };
}

export class BoundedSpanProcessor implements SpanProcessor {
  readonly counts: SpanCounts = { exported: 0, droppedQueueFull: 0, droppedExportFailed: 0 };
  private queue: ReadableSpan[] = [];
  private inFlight: Promise<void> | undefined;
  private readonly loop: PeriodicTask;
  private stopped = false;

  constructor(
    private readonly exporter: SpanExporter,
    private readonly opts: BoundedOptions,
  ) {
    // exportNext never rejects (a failed export counts its spans as dropped), so nothing is logged.
    this.loop = new PeriodicTask(() => this.exportNext(), {
      what: 'span export',
      logger: { warn: () => {} },
      pauseMs: opts.scheduledDelayMs,
    });
    void this.loop.start('after-pause');
  }

  onStart(_span: Span, _parent: Context): void {}

  onEnd(span: ReadableSpan): void {
    if (this.stopped) return;
    if (this.queue.length >= this.opts.maxQueueSize) {
      this.counts.droppedQueueFull++;
      return;
    }
    this.queue.push(span);
    if (this.queue.length >= this.opts.maxExportBatchSize) this.exportNext();
  }

  /** Starts one export unless one is in flight; its spans leave the queue at once. */
  private exportNext(): Promise<void> {
    if (this.inFlight || this.queue.length === 0) return this.inFlight ?? Promise.resolve();
    const batch = this.queue.splice(0, this.opts.maxExportBatchSize);
    this.inFlight = new Promise<void>((resolve) => {
      let settled = false;
      const settle = (ok: boolean) => {
        if (settled) return;
        settled = true;
        clearTimeout(timeout);
        if (ok) this.counts.exported += batch.length;
        else this.counts.droppedExportFailed += batch.length;
        resolve();
      };
      const timeout = setTimeout(() => settle(false), this.opts.exportTimeoutMs);
      timeout.unref();
      try {
        this.exporter.export(batch, (result) => settle(result.code === ExportResultCode.SUCCESS));
      } catch {
        settle(false);
      }
    }).finally(() => {
      this.inFlight = undefined;
    });
    return this.inFlight;
  }

  /** Sends what is queued, batch by batch; bounded by the export timeout per batch. */
  async forceFlush(): Promise<void> {
    while (this.inFlight || this.queue.length > 0) await this.exportNext();
  }

  /** One last batch (bounded by the export timeout), so a dead collector cannot hold a
   *  shutdown batch after batch; what is left then counts as dropped. */
  async shutdown(): Promise<void> {
    void this.loop.stop(); // it may be waiting on the export in flight, which is bounded below
    this.stopped = true;
    const bounded = (p: Promise<unknown>) => {
      let timer: NodeJS.Timeout | undefined;
      const limit = new Promise((r) => (timer = setTimeout(r, Math.min(this.opts.exportTimeoutMs, SHUTDOWN_WAIT_MS))));
      return Promise.race([p, limit]).finally(() => clearTimeout(timer));
    };
    await bounded(this.inFlight ?? Promise.resolve());
    if (!this.inFlight) await bounded(this.exportNext());
    this.counts.droppedExportFailed += this.queue.length;
    this.queue = [];
    await bounded(this.exporter.shutdown());
  }
}
