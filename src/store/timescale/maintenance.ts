/**
 * TimescaleDB mode's upkeep, done by the daemon itself: TimescaleDB's job scheduler does not
 * run everywhere (none in PGlite; jobs fail on some PostgreSQL minors). Only public API.
 *
 * - Refresh: late events (behind an aggregate's watermark) count once a refresh covers their
 *   day. A refresh recomputes whole days from the raw rows left, so it never reaches before
 *   the physical retention horizon (the longest plan's raw retention, where chunks are dropped):
 *   per-plan raw retention is a visibility limit in queries, never a per-account DELETE.
 * - Retention: drop_chunks at the horizon, compression past the shortest plan's retention,
 *   the aggregates' own chunks dropped at the longest rollup retention.
 */
import { windowBounds } from '../../calendar.js';
import type { Queryable } from '../types.js';

const DAY = 86_400_000;

export interface Horizons {
  /** Longest raw retention of any plan: raw chunks older than this are dropped. */
  longestRawDays: number;
  /** Shortest raw retention: chunks older than this are compressed. */
  shortestRawDays: number;
  /** Longest rollup retention: aggregate rows older than this many months are dropped. */
  longestRollupMonths: number;
}

export async function loadHorizons(db: Queryable): Promise<Horizons> {
  const [row] = await db.query<{ longest: number; shortest: number; months: number }>(
    `SELECT max(raw_retention_days) AS longest, min(raw_retention_days) AS shortest,
            max(rollup_retention_months) AS months FROM plans`,
  );
  return {
    longestRawDays: row?.longest ?? 90,
    shortestRawDays: row?.shortest ?? 7,
    longestRollupMonths: row?.months ?? 13,
  };
}

/** The continuous aggregates over usage_events (their names differ in a converted database). */
export async function aggregateNames(db: Queryable): Promise<string[]> {
  return (
    await db.query<{ name: string }>(
      `SELECT format('%I.%I', view_schema, view_name) AS name FROM timescaledb_information.continuous_aggregates
      WHERE hypertable_name = 'usage_events' ORDER BY view_name`,
    )
  ).map((r) => r.name);
}

const floorDay = (t: number) => Math.floor(t / DAY) * DAY;
const literal = (s: string) => `'${s.replace(/'/g, "''")}'`;

/** The refresh window: from the first whole day after the horizon to today 00:00 UTC (today
 *  stays real-time, read from the raw events). Undefined when empty. */
export function refreshWindow(now: number, longestRawDays: number): { start: Date; end: Date } | undefined {
  const start = floorDay(now - longestRawDays * DAY) + DAY;
  const end = floorDay(now);
  return start < end ? { start: new Date(start), end: new Date(end) } : undefined;
}

/** Refreshes every aggregate over the window, or over [from, today) when given (conversion:
 *  the whole history once). Each CALL is its own statement, outside any transaction. */
export async function refreshAggregates(
  db: Queryable,
  opts: { now?: number; horizons?: Horizons; from?: Date } = {},
): Promise<number> {
  const now = opts.now ?? Date.now();
  const window = opts.from
    ? { start: new Date(floorDay(opts.from.getTime())), end: new Date(floorDay(now)) }
    : refreshWindow(now, (opts.horizons ?? (await loadHorizons(db))).longestRawDays);
  if (!window || window.start >= window.end) return 0;
  const names = await aggregateNames(db);
  for (const name of names) {
    await db.query(
      `CALL refresh_continuous_aggregate(${literal(name)}, ${literal(window.start.toISOString())}, ${literal(window.end.toISOString())})`,
    );
  }
  return names.length;
}

/** usage_events and, where sql/110 made it, its tag table: their chunks go together. */
async function rawHypertables(db: Queryable): Promise<string[]> {
  const [row] = await db.query<{ tags: string | null }>(`SELECT to_regclass('usage_event_tags')::text AS tags`);
  return row?.tags ? ['usage_events', 'usage_event_tags'] : ['usage_events'];
}

export interface TimescaleRetentionResult {
  droppedChunks: number;
  compressedChunks: number;
  droppedAggregateChunks: number;
  carriedRows: number;
}

/** Physical retention in TimescaleDB mode; refreshes first, so nothing is dropped unmaterialized. */
export async function timescaleRetention(db: Queryable, now = Date.now()): Promise<TimescaleRetentionResult> {
  const h = await loadHorizons(db);
  await refreshAggregates(db, { now, horizons: h });
  const count = async (sql: string, params: unknown[]) =>
    Number((await db.query<{ n: string }>(sql, params))[0]?.n ?? 0);

  const rawCutoff = new Date(now - h.longestRawDays * DAY);
  const hypertables = await rawHypertables(db);
  let droppedChunks = 0;
  for (const table of hypertables) {
    const n = await count(`SELECT count(*) AS n FROM drop_chunks($1::regclass, older_than => $2::timestamptz)`, [
      table,
      rawCutoff,
    ]);
    if (table === 'usage_events') droppedChunks = n;
  }

  const compressBefore = new Date(now - h.shortestRawDays * DAY);
  const chunks = await db.query<{ chunk: string; hypertable: string }>(
    `SELECT format('%I.%I', chunk_schema, chunk_name) AS chunk, hypertable_name AS hypertable
      FROM timescaledb_information.chunks
      WHERE hypertable_name = ANY($2::text[]) AND NOT is_compressed AND range_end <= $1::timestamptz ORDER BY range_start`,
    [compressBefore, hypertables],
  );
  for (const { chunk } of chunks)
    await db.query('SELECT compress_chunk($1::regclass, if_not_compressed => true)', [chunk]);

  const rollupCutoff = new Date(windowBounds('month', now, -h.longestRollupMonths).start);
  let droppedAggregateChunks = 0;
  for (const name of await aggregateNames(db)) {
    droppedAggregateChunks += await count(
      `SELECT count(*) AS n FROM drop_chunks($1::regclass, older_than => $2::timestamptz)`,
      [name, rollupCutoff],
    );
  }
  let carriedRows = 0;
  for (const table of ['usage_daily_carried', 'usage_tag_daily_carried']) {
    const [exists] = await db.query<{ t: string | null }>('SELECT to_regclass($1)::text AS t', [table]);
    if (!exists?.t) continue;
    carriedRows += (
      await db.query(`DELETE FROM ${table} WHERE day < $1::date RETURNING 1`, [rollupCutoff.toISOString().slice(0, 10)])
    ).length;
  }
  return {
    droppedChunks,
    compressedChunks: chunks.filter((c) => c.hypertable === 'usage_events').length,
    droppedAggregateChunks,
    carriedRows,
  };
}
