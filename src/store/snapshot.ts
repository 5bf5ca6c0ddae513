import type { Db } from './types.js';

type EventRef = { id: string; time: string };

/**
 * Figures (`sql`) and which of the events a sidecar counts locally until a re-read shows them
 * (hard-cap costs, quota calls) are written, from ONE snapshot: a read-only repeatable-read
 * transaction takes it at its first statement. `events` is asked only after that statement
 * answered: an event the sidecar gains later was recorded after the snapshot, so its write
 * (which starts later still) cannot be in it; every event gained before is looked up in the
 * same snapshot. A local count is dropped exactly when the figures include it. While nothing is
 * counted locally (the usual idle state) the figures are one plain statement.
 *
 * `name`: the figures are re-read every flush interval by every sidecar, so their statement is
 * a named one (QueryOptions.name): parsed and planned once per connection. Its result columns
 * must not follow a table's column list (a `SELECT *` would fail once a migration adds one).
 */
export async function readWithSeen<R>(
  db: Db,
  sql: string,
  params: unknown[],
  events: () => EventRef[],
  name?: string,
): Promise<{ rows: R[]; seen: string[] }> {
  const opts = name ? { name } : undefined;
  if (events().length === 0) {
    const rows = await db.query<R>(sql, params, opts);
    // Still nothing counted locally: nothing the figures hold is counted twice. Else an event
    // entered the list while they were read and they may hold it: read again, in one snapshot.
    if (events().length === 0) return { rows, seen: [] };
  }
  return db.transaction(async (tx) => {
    await tx.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
    const rows = await tx.query<R>(sql, params, opts);
    const refs = events();
    if (refs.length === 0) return { rows, seen: [] };
    const seen = await tx.query<{ id: string }>(
      `SELECT e.event_id::text AS id FROM usage_events e
         JOIN unnest($1::timestamptz[], $2::uuid[]) AS p(time, id) ON e.time = p.time AND e.event_id = p.id`,
      [refs.map((e) => e.time), refs.map((e) => e.id)],
    );
    return { rows, seen: seen.map((r) => r.id) };
  });
}

/**
 * Skips a periodic re-read (quota counts, budget spend) that would find what the last one found.
 * On the embedded store this process is the only writer and the store counts the statements
 * that may change data (Db.writes): while that count and the re-read's period (its month) stand
 * still, the figures and which local events they hold stand still too, and reading them every
 * flush interval would be an idle daemon's main work. The count is taken before reading, so a
 * write during the read makes the next interval read again; a failed read is retried. On
 * PostgreSQL (no count) every interval reads.
 */
export class RereadSkip {
  #last: { writes: number; period: string } | undefined;

  /** Runs `read` unless nothing changed since the last read that succeeded; true when it ran. */
  async run(db: Db, period: string, read: () => Promise<unknown>): Promise<boolean> {
    const writes = db.writes?.();
    const last = this.#last;
    if (writes !== undefined && last?.writes === writes && last.period === period) return false;
    await read();
    this.#last = writes === undefined ? undefined : { writes, period };
    return true;
  }
}
