/**
 * The rows of an export, read with bounded memory in short statements: raw events by keyset on
 * (time, event_id), FOCUS groups one UTC day at a time. No statement, transaction or cursor
 * stays open while the export waits on its reader: a client that reads slowly (or never) holds
 * one batch of memory and no database connection, on PostgreSQL as on the embedded store,
 * whose single connection the event writer shares.
 */
import type { Queryable } from '../store/types.js';
import type { ExportParams } from './params.js';

/** Rows fetched per round trip (a batch of raw rows is about 0.2 MB of text). */
export const BATCH_ROWS = 1_000;

export interface RawRow {
  event_id: string;
  time_utc: string;
  provider: string;
  model: string;
  key_id: string;
  status: number;
  input_tokens: string;
  cached_input_tokens: string;
  output_tokens: string;
  cost: string;
  usage_source: string;
  tags: Record<string, unknown> | null;
}

/** A grouped row: the group's columns, then the sums (exact decimal text). */
export interface GroupRow {
  day?: string;
  provider?: string;
  model?: string;
  tag_value?: string | null;
  tags?: Record<string, unknown> | null;
  requests: string;
  input_tokens: string;
  cached_input_tokens: string;
  output_tokens: string;
  cost: string;
}

const RAW_COLUMNS = `event_id, to_char(time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS time_utc,
  provider, model, key_id, status, input_tokens, cached_input_tokens, output_tokens, cost::text AS cost,
  usage_source, tags`;
/** What the FOCUS export prices each event from (src/export/focus.ts FocusEvent). */
const FOCUS_EVENT_COLUMNS = `event_id, to_char(time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS time_utc,
  provider, model, requested_model, input_tokens, cached_input_tokens, cache_write_tokens, output_tokens,
  reasoning_tokens, units, service_tier, unpriced, tags`;
const SUMS = `count(*)::text AS requests, sum(input_tokens)::text AS input_tokens,
  sum(cached_input_tokens)::text AS cached_input_tokens, sum(output_tokens)::text AS output_tokens,
  sum(cost)::text AS cost`;
const DAY = `to_char(time AT TIME ZONE 'UTC', 'YYYY-MM-DD')`;
/** A tag's value when the caller sent it as a string (the only kind tags hold). */
const tagValue = (arg: string) => `CASE WHEN jsonb_typeof(tags -> ${arg}) = 'string' THEN tags ->> ${arg} END`;

const instant = (day: string) => `${day}T00:00:00Z`;

interface Statement {
  sql: string;
  params: unknown[];
}

/** The account's events in [from, to): the WHERE every statement shares ($1..$3). */
const WHERE = 'account_id = $1 AND time >= $2::timestamptz AND time < $3::timestamptz';

function rangeParams(accountId: string, from: string, to: string): unknown[] {
  return [accountId, instant(from), instant(to)];
}

function groupStatement(accountId: string, p: ExportParams, from: string, to: string): Statement {
  const params = rangeParams(accountId, from, to);
  const g = p.groupBy!;
  if (g.kind === 'day')
    return { sql: `SELECT ${DAY} AS day, ${SUMS} FROM usage_events WHERE ${WHERE} GROUP BY 1 ORDER BY 1`, params };
  if (g.kind === 'model') {
    return {
      sql: `SELECT provider, model, ${SUMS} FROM usage_events WHERE ${WHERE} GROUP BY 1, 2 ORDER BY 1, 2`,
      params,
    };
  }
  params.push(g.key);
  return {
    sql: `SELECT ${tagValue('$4')} AS tag_value, ${SUMS} FROM usage_events WHERE ${WHERE}
      GROUP BY 1 ORDER BY 1 NULLS LAST`,
    params,
  };
}

/** The distinct tag keys of the account's events in the range: the CSV's `tag:` columns,
 *  known before the first row is written (one pass, memory of the keys only). */
export async function tagKeys(db: Queryable, accountId: string, p: ExportParams): Promise<string[]> {
  const rows = await db.query<{ key: string }>(
    `SELECT DISTINCT k.key FROM usage_events, jsonb_each(tags) AS k
      WHERE ${WHERE} AND jsonb_typeof(k.value) = 'string' ORDER BY 1`,
    rangeParams(accountId, p.from, p.to),
  );
  return rows.map((r) => r.key);
}

export type OnBatch<R> = (rows: R[]) => Promise<void>;

/** Every row of the export, in order, a batch at a time; `onBatch` may wait (backpressure).
 *  Each statement is short and ends before its rows are handed on: no connection is held while
 *  the export waits on its reader. */
export async function eachBatch(
  db: Queryable,
  accountId: string,
  p: ExportParams,
  onBatch: OnBatch<RawRow | GroupRow>,
): Promise<void> {
  // FOCUS prices each event unit by unit (src/export/focus.ts): it reads events, in time order.
  if (p.format === 'focus') return rawByKeyset(db, accountId, p, FOCUS_EVENT_COLUMNS, onBatch);
  if (p.groupBy === undefined) return rawByKeyset(db, accountId, p, RAW_COLUMNS, onBatch);
  // Groups over the whole range are few (a day each, models, tag values).
  const st = groupStatement(accountId, p, p.from, p.to);
  const rows = await db.query<GroupRow>(st.sql, st.params);
  for (let i = 0; i < rows.length; i += BATCH_ROWS) await onBatch(rows.slice(i, i + BATCH_ROWS));
}

async function rawByKeyset(
  db: Queryable,
  accountId: string,
  p: ExportParams,
  columns: string,
  onBatch: OnBatch<RawRow>,
): Promise<void> {
  let after: { time: string; id: string } | undefined;
  for (;;) {
    const params = rangeParams(accountId, p.from, p.to);
    const keyset = after
      ? `AND (time, event_id) > ($${params.push(after.time)}::timestamptz, $${params.push(after.id)}::uuid)`
      : '';
    const rows = await db.query<RawRow>(
      `SELECT ${columns} FROM usage_events WHERE ${WHERE} ${keyset} ORDER BY time, event_id LIMIT ${BATCH_ROWS}`,
      params,
    );
    if (rows.length === 0) return;
    await onBatch(rows);
    if (rows.length < BATCH_ROWS) return;
    const last = rows[rows.length - 1]!;
    after = { time: last.time_utc, id: last.event_id };
  }
}
