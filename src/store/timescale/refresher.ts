import type { Logger } from '../../log.js';
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
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> = Promise.resolve();
  let stopped = false;
  let failing = false;

  const runOnce = async () => {
    try {
      await store.tryAdvisoryLock('meter.timescale-refresh', (conn) => refreshAggregates(conn));
      if (failing) logger.info('continuous aggregates refreshed again');
      failing = false;
    } catch (err) {
      if (!failing)
        logger.warn(
          { err: { message: (err as Error).message } },
          'refreshing the continuous aggregates failed; will retry',
        );
      failing = true;
    }
  };
  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(
      () => {
        running = runOnce().finally(schedule);
      },
      nextRefreshDelay(Date.now(), opts.intervalMs),
    );
    timer.unref();
  };

  return {
    name: 'aggregate-refresher',
    start() {
      if (store.kind !== 'timescale') return;
      // Catch up at once: events written while no sidecar ran may sit behind the watermark.
      running = runOnce().finally(schedule);
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
