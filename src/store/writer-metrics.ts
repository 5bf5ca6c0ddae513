import type { DaemonMetrics } from '../metrics/registry.js';
import type { EventWriter } from './writer.js';

/** The durable pipeline's state for /metrics, read from the writer when scraped. */
export function registerWriterMetrics(metrics: DaemonMetrics, writer: EventWriter): void {
  metrics.gauge(
    'meter_spool_backlog_events',
    'Usage events not yet written to the store (in memory or in the spool)',
    [],
    (emit) => emit({}, writer.stats().backlog),
  );
  metrics.gauge('meter_spool_backlog_bytes', 'Bytes of the usage events not yet written to the store', [], (emit) =>
    emit({}, writer.backlogBytes()),
  );
  metrics.gauge(
    'meter_writer_lag_seconds',
    'Age of the oldest usage event not yet written to the store (0 when none waits)',
    [],
    async (emit) => emit({}, await writer.lagSeconds()),
  );
  metrics.counter(
    'meter_write_batches_total',
    'Batches of usage events written to the store (one statement each)',
    [],
    (emit) => emit({}, writer.stats().batches),
  );
  metrics.counter(
    'meter_write_failures_total',
    'Failed batch writes (the events stay in the spool and are retried)',
    [],
    (emit) => emit({}, writer.stats().failedAttempts),
  );
  metrics.counter('meter_events_written_total', 'Usage events written to the store', [], (emit) =>
    emit({}, writer.stats().written),
  );
  metrics.counter(
    'meter_events_dead_lettered_total',
    'Usage events the store rejected for their data (kept in the dead-letter file)',
    [],
    (emit) => emit({}, writer.stats().deadLettered),
  );
}
