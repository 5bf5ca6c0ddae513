/**
 * The lease statements' SQL (docs/fleet.md): every sidecar of a fleet runs these against
 * `fleet_leases`, old and new alike, so the lock names and rows they write keep their form.
 */
import type { Db, Queryable } from '../store/types.js';
import { leaseId, MINUTE_MS, type LimitSpec } from './lease.js';

/** What the database shows under the limit's lock (integers as text). */
export interface Figures {
  /** What the database counts of the window (the spec's `used` statement). */
  used: string;
  /** What the other sidecars were granted, and what they held (spent) when they last wrote. */
  others_granted: string;
  others_held: string;
  /** Which of this sidecar's ended calls have their usage events written. */
  seen: string[];
}

/** The limit's advisory lock, until the transaction ends: one lease statement per limit at once. */
export async function lockLimit(tx: Queryable, key: string, window: string): Promise<void> {
  await tx.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`meter:fleet:${key}@${window}`]);
}

/**
 * Drops the limit's rows of past windows and long-lapsed leases, then reads the figures in one
 * snapshot. `ttlMs`: the lease period; `ended`: this sidecar's calls whose events may be written.
 */
export async function readFigures(
  tx: Queryable,
  spec: LimitSpec,
  window: string,
  holder: string,
  ttlMs: number,
  ended: { id: string; time: string }[],
): Promise<Figures> {
  const used = spec.used ?? { sql: 'SELECT 0', params: [] };
  const n = used.params.length;
  const [row] = await tx.query<Figures>(
    `WITH gone AS (
       DELETE FROM fleet_leases WHERE limit_key = $${n + 1}
          AND (window_start < $${n + 2} OR expires_at < now() - $${n + 4} * interval '1 millisecond')),
     peers AS (
       -- A lapsed lease (its sidecar died or lost the database) still counts for the grace
       -- period: per-minute slots all it was granted (any may have been used in its last
       -- minute), other limits what it had spent when it last wrote.
       SELECT expires_at > now() AS live, granted,
              CASE WHEN expires_at <= now() AND $${n + 7}::boolean THEN granted ELSE held END AS held
         FROM fleet_leases
        WHERE limit_key = $${n + 1} AND window_start = $${n + 2} AND holder <> $${n + 3}
          AND expires_at >= now() - $${n + 4} * interval '1 millisecond')
     SELECT (${used.sql})::text AS used,
            (SELECT COALESCE(sum(CASE WHEN live THEN granted ELSE held END), 0) FROM peers)::text AS others_granted,
            (SELECT COALESCE(sum(held), 0) FROM peers)::text AS others_held,
            (SELECT COALESCE(array_agg(e.event_id::text), '{}') FROM usage_events e
               JOIN unnest($${n + 5}::timestamptz[], $${n + 6}::uuid[]) AS p(time, id)
                 ON e.time = p.time AND e.event_id = p.id) AS seen`,
    [
      ...used.params,
      spec.key,
      window,
      holder,
      // A lapsed lease still counts for a while: a minute for per-minute slots (their calls'
      // minute), one more lease period for spend and calls (events its sidecar had not
      // written when it last wrote; the database shows the rest by then).
      spec.kind === 'minute' ? MINUTE_MS : ttlMs,
      ended.map((e) => e.time),
      ended.map((e) => e.id),
      spec.kind === 'minute',
    ],
  );
  return row!;
}

/** This sidecar's row of the lease; none when it holds nothing and wants nothing. */
export async function writeLease(
  tx: Queryable,
  key: string,
  window: string,
  holder: string,
  row: { granted: bigint; held: bigint; wants: bigint; ttlMs: number } | undefined,
): Promise<void> {
  const params = [key, window, holder];
  if (!row) {
    await tx.query('DELETE FROM fleet_leases WHERE limit_key = $1 AND window_start = $2 AND holder = $3', params);
    return;
  }
  await tx.query(
    `INSERT INTO fleet_leases (limit_key, window_start, holder, granted, held, wants, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, now() + $7 * interval '1 millisecond')
     ON CONFLICT (limit_key, window_start, holder) DO UPDATE
       SET granted = EXCLUDED.granted, held = EXCLUDED.held, wants = EXCLUDED.wants, expires_at = EXCLUDED.expires_at`,
    [...params, String(row.granted), String(row.held), String(row.wants), row.ttlMs],
  );
}

/** The leases (`leaseId`) this holder shares with another sidecar that wants room. */
export async function wantedLeases(db: Db, holder: string): Promise<Set<string>> {
  const rows = await db.query<{ limit_key: string; window_start: Date }>(
    `SELECT DISTINCT w.limit_key, w.window_start FROM fleet_leases w
       JOIN fleet_leases m ON m.limit_key = w.limit_key AND m.window_start = w.window_start
      WHERE m.holder = $1 AND w.holder <> $1 AND w.wants > 0 AND w.expires_at > now()`,
    [holder],
    { name: 'meter_fleet_wanted' },
  );
  return new Set(rows.map((r) => leaseId(r.limit_key, new Date(r.window_start).getTime())));
}
