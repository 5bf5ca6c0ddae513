import type { Queryable } from './types.js';

/**
 * What a sidecar counts locally until a re-read shows it (hard-cap costs, quota calls) is
 * checked in the same snapshot the figures are read from, so a local count is dropped exactly
 * when those figures include it. One statement has one snapshot (its CTEs and subqueries all
 * see it), so the figures and the check are one statement: one round trip, no transaction.
 */
export async function readWithSeen<R extends object>(
  db: Queryable, sql: string, params: unknown[], events: readonly { id: string; time: string }[],
): Promise<{ rows: R[]; seen: string[] }> {
  if (events.length === 0) return { rows: await db.query<R>(sql, params), seen: [] };
  const n = params.length;
  // Every row carries the seen ids; with no rows, the LEFT JOIN still returns one (`__row` null).
  const rows = await db.query<R & { __row: boolean | null; __seen: string[] }>(
    `WITH r AS (SELECT true AS __row, q.* FROM (${sql}) AS q),
          s AS (SELECT coalesce(array_agg(e.event_id::text), '{}'::text[]) AS seen FROM usage_events e
                  JOIN unnest($${n + 1}::timestamptz[], $${n + 2}::uuid[]) AS p(time, id) ON e.time = p.time AND e.event_id = p.id)
     SELECT s.seen AS __seen, r.* FROM s LEFT JOIN r ON true`,
    [...params, events.map((e) => e.time), events.map((e) => e.id)],
  );
  const seen = rows[0]?.__seen ?? [];
  return { rows: rows.filter((r) => r.__row).map(({ __row: _row, __seen: _seen, ...row }) => row as unknown as R), seen };
}
