import type { Logger } from '../../log.js';
import { PeriodicTask } from '../../periodic.js';
import type { Component } from '../../component.js';
import type { Db, Queryable } from '../types.js';
import { refreshAggregates } from './maintenance.js';

/** At most one refresh per this interval for the whole fleet (sql/111's claim)... */
export const REFRESH_INTERVAL_MS = 50_000;
/** ...and each sidecar checks this often, so one starts within 60 s of the last: a late event
 *  is in analytics within 60 s plus one refresh. */
export const REFRESH_CHECK_MS = 10_000;
/** After 00:00 UTC yesterday's bucket is complete: refresh it soon, not up to a minute later. */
const AFTER_MIDNIGHT_MS = 2_000;

/** The next check: one check period from now, or just after the coming 00:00 UTC if sooner. */
export function nextRefreshDelay(now: number, checkMs = REFRESH_CHECK_MS): number {
  const midnight = Math.floor(now / 86_400_000) * 86_400_000 + 86_400_000 + AFTER_MIDNIGHT_MS;
  return Math.max(0, Math.min(checkMs, midnight - now));
}

/**
 * Takes the fleet's next refresh, atomically: true when the last one was claimed at least
 * intervalMs ago, or before today's 00:00:02 UTC once that has passed (by the database's clock).
 */
export async function claimRefresh(db: Queryable, intervalMs = REFRESH_INTERVAL_MS): Promise<string | undefined> {
  // As text: a JS Date would drop the microseconds settleRefresh matches on.
  const [row] = await db.query<{ started_at: string }>(
    `UPDATE aggregate_refresh SET started_at = now()
      WHERE started_at <= now() - $1 * interval '1 millisecond'
         OR (now() >= date_trunc('day', now(), 'UTC') + $2 * interval '1 millisecond'
             AND started_at < date_trunc('day', now(), 'UTC') + $2 * interval '1 millisecond')
      RETURNING started_at::text`,
    [intervalMs, AFTER_MIDNIGHT_MS],
  );
  return row?.started_at;
}

/** Records how a claimed refresh ended: done, or failed (the claim is handed back, so the next
 *  check of any sidecar retries at once instead of an interval later). */
async function settleRefresh(db: Queryable, claimed: string, ok: boolean): Promise<void> {
  await db.query(
    ok
      ? 'UPDATE aggregate_refresh SET refreshed_at = started_at WHERE started_at = $1::timestamptz'
      : 'UPDATE aggregate_refresh SET started_at = refreshed_at WHERE started_at = $1::timestamptz',
    [claimed],
  );
}

/**
 * Keeps the continuous aggregates refreshed (TimescaleDB mode only): each sidecar checks every
 * REFRESH_CHECK_MS and just after 00:00 UTC; one refresh per REFRESH_INTERVAL_MS runs in the
 * whole fleet (claimed in the database), under an advisory lock so none overlaps another.
 */
export function aggregateRefresher(opts: {
  store: Db;
  logger: Logger;
  intervalMs?: number;
  checkMs?: number;
  /** The refresh itself (a test may count them); default: every aggregate. */
  refresh?: (conn: Queryable) => Promise<unknown>;
}): Component {
  const { store, logger } = opts;
  const intervalMs = opts.intervalMs ?? REFRESH_INTERVAL_MS;
  const checkMs = opts.checkMs ?? Math.min(REFRESH_CHECK_MS, intervalMs);
  const refresh = opts.refresh ?? ((conn: Queryable) => refreshAggregates(conn));
  // One refresh per interval for the whole fleet: the claim in aggregate_refresh decides, the
  // advisory lock keeps refreshes from overlapping; a failed refresh hands its claim back.
  const task = new PeriodicTask(
    () =>
      store.tryAdvisoryLock('meter.timescale-refresh', async (conn) => {
        const claimed = await claimRefresh(conn, intervalMs);
        if (!claimed) return;
        try {
          await refresh(conn);
        } catch (err) {
          await settleRefresh(conn, claimed, false).catch(() => {});
          throw err;
        }
        await settleRefresh(conn, claimed, true);
      }),
    { what: 'continuous aggregates: refresh', logger, pauseMs: () => nextRefreshDelay(Date.now(), checkMs) },
  );

  return {
    name: 'aggregate-refresher',
    start() {
      if (store.kind !== 'timescale') return;
      // Check at once: events written while no sidecar ran may sit behind the watermark.
      void task.start('now');
    },
    stop: () => task.stop(),
  };
}
