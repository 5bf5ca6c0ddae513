import type { Logger } from '../../log.js';
import { PeriodicTask } from '../../periodic.js';
import type { Component } from '../../component.js';
import type { Db } from '../types.js';
import { refreshAggregates } from './maintenance.js';

export const REFRESH_INTERVAL_MS = 60_000;
/** After 00:00 UTC yesterday's bucket is complete: refresh it soon, not up to a minute later. */
const AFTER_MIDNIGHT_MS = 2_000;

/** The next refresh: a minute from now, or just after the coming 00:00 UTC if that is sooner. */
export function nextRefreshDelay(now: number, intervalMs = REFRESH_INTERVAL_MS): number {
  const midnight = Math.floor(now / 86_400_000) * 86_400_000 + 86_400_000 + AFTER_MIDNIGHT_MS;
  return Math.max(0, Math.min(intervalMs, midnight - now));
}

/**
 * Keeps the continuous aggregates refreshed (TimescaleDB mode only): every minute and just
 * after 00:00 UTC, one sidecar of a fleet at a time (advisory lock; the others skip). A late
 * event is therefore in analytics within one interval plus one refresh.
 */
export function aggregateRefresher(opts: { store: Db; logger: Logger; intervalMs?: number }): Component {
  const { store, logger } = opts;
  const task = new PeriodicTask(
    () => store.tryAdvisoryLock('meter.timescale-refresh', (conn) => refreshAggregates(conn)),
    { what: 'continuous aggregates: refresh', logger, pauseMs: () => nextRefreshDelay(Date.now(), opts.intervalMs) },
  );

  return {
    name: 'aggregate-refresher',
    start() {
      if (store.kind !== 'timescale') return;
      // Catch up at once: events written while no sidecar ran may sit behind the watermark.
      void task.start('now');
    },
    stop: () => task.stop(),
  };
}
