import type { Db, Queryable } from './types.js';

/**
 * Runs `fn` in one read-only repeatable-read transaction: every statement sees the snapshot the
 * first one took. What a sidecar counts locally until a re-read shows it (hard-cap costs, quota
 * calls) is checked with `seenEvents` in the snapshot the figures were read from, so a local
 * count is dropped exactly when those figures include it.
 */
export function inSnapshot<T>(db: Db, fn: (tx: Queryable) => Promise<T>): Promise<T> {
  return db.transaction(async (tx) => {
    await tx.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
    return fn(tx);
  });
}

/** Which of these events are written (usage_events' key is (time, event_id)). */
export async function seenEvents(db: Queryable, events: { id: string; time: string }[]): Promise<string[]> {
  if (events.length === 0) return [];
  const rows = await db.query<{ id: string }>(
    `SELECT e.event_id::text AS id FROM usage_events e
       JOIN unnest($1::timestamptz[], $2::uuid[]) AS p(time, id) ON e.time = p.time AND e.event_id = p.id`,
    [events.map((e) => e.time), events.map((e) => e.id)],
  );
  return rows.map((r) => r.id);
}
