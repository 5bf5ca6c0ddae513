import type { UsageEvent } from '../metering/event.js';
import type { Db, StoreKind } from './types.js';

/**
 * One batch of usage events = ONE statement: the events go in as one JSON array
 * (json_to_recordset), `ON CONFLICT DO NOTHING` skips ids already written, and only the rows it RETURNs feed
 * the rollup upserts (CTEs), so a retried or replayed batch changes nothing. Rollup rows are
 * upserted in key order, daily before tags, so concurrent writers lock rows in the same order
 * and cannot deadlock. Money is summed as NUMERIC by the database, never in JS.
 *
 * An event with a claim (batch results, README "Batch results") claims its key in usage_claims
 * in the same statement; it is charged only if this statement made the claim. Otherwise (the
 * same results downloaded again, by this sidecar or another) it is recorded as a call that used
 * nothing: still one event, as every proxied call is, so request counts, quotas and the hard
 * cap's ledger, which follow event ids, stay right.
 */

/** Distinct values of one tag key rolled up per account and day; more go to the overflow row. */
export const TAG_VALUES_PER_KEY_DAY = 1000;
/** The overflow row's tag_value: '' can never be a real value (values are 1–256 characters). */
export const TAG_OVERFLOW_VALUE = '';

/** Each column, its type, and the UsageEvent field (the spooled JSON line's key) it comes from. */
const COLUMNS: [name: string, type: string, key: string][] = [
  ['time', 'timestamptz', 'time'],
  ['event_id', 'uuid', 'id'],
  ['account_id', 'uuid', 'accountId'],
  ['key_id', 'text', 'keyId'],
  ['provider', 'text', 'provider'],
  ['model', 'text', 'model'],
  ['requested_model', 'text', 'requestedModel'],
  ['status', 'smallint', 'status'],
  ['input_tokens', 'int8', 'inputTokens'],
  ['output_tokens', 'int8', 'outputTokens'],
  ['cached_input_tokens', 'int8', 'cachedInputTokens'],
  ['cache_write_tokens', 'int8', 'cacheWriteTokens'],
  ['reasoning_tokens', 'int8', 'reasoningTokens'],
  ['cost', 'numeric', 'cost'],
  ['unpriced', 'bool', 'unpriced'],
  ['price_version', 'text', 'priceVersion'],
  ['usage_source', 'text', 'usageSource'],
  ['latency_ms', 'float8', 'latencyMs'],
  ['ttfb_ms', 'float8', 'ttfbMs'],
  ['stream', 'bool', 'stream'],
  ['tags', 'jsonb', 'tags'],
  ['provider_cost_ticks', 'int8', 'providerCostTicks'],
  ['units', 'jsonb', 'units'],
  ['service_tier', 'text', 'serviceTier'],
  ['usage_raw', 'jsonb', 'usageRaw'],
  ['would_block', 'jsonb', 'wouldBlock'],
];
const names = COLUMNS.map(([n]) => n).join(', ');

// The batch is one JSON array of the events exactly as the spool holds them (one line each):
// no per-event parameter building in the daemon, and the database reads each field by name
// (a field missing from an older version's line is NULL; tags default to none).
const INPUT = `input AS (
  SELECT ${COLUMNS.map(([n, , k]) => (n === 'tags' ? `coalesce(t."${k}", '{}'::jsonb) AS ${n}` : `t."${k}" AS ${n}`)).join(', ')},
    t."claim" AS claim
  FROM json_to_recordset($1::json) AS t(${COLUMNS.map(([, type, k]) => `"${k}" ${type}`).join(', ')}, "claim" text)
)`;

// Claims in key order (concurrent writers wait on each other's keys in the same order); of two
// events of one batch with the same key, the earlier claims it.
const CLAIM = `claimed AS (
  INSERT INTO usage_claims (account_id, claim, event_id, claimed_at)
  SELECT account_id, claim, event_id, time FROM input WHERE claim IS NOT NULL
  ORDER BY account_id, claim, time, event_id
  ON CONFLICT (account_id, claim) DO NOTHING
  RETURNING event_id
), charged AS (
  SELECT i.*, (i.claim IS NULL OR EXISTS (SELECT 1 FROM claimed c WHERE c.event_id = i.event_id)) AS charged FROM input i
)`;

/** What an event whose claim another event holds records instead of its usage. */
const UNCHARGED: Record<string, string> = {
  input_tokens: '0',
  output_tokens: '0',
  cached_input_tokens: '0',
  cache_write_tokens: '0',
  reasoning_tokens: '0',
  cost: '0',
  unpriced: 'false',
  usage_source: `'none'`,
  provider_cost_ticks: 'NULL',
  units: 'NULL',
};
const chargedColumns = COLUMNS.map(([n]) =>
  UNCHARGED[n] ? `CASE WHEN charged THEN ${n} ELSE ${UNCHARGED[n]} END` : n,
).join(', ');

const INSERT_EVENTS = `ins AS (
  INSERT INTO usage_events (${names})
  SELECT ${chargedColumns} FROM charged ORDER BY time, event_id
  ON CONFLICT (time, event_id) DO NOTHING
  RETURNING account_id, (time AT TIME ZONE 'UTC')::date AS day, provider, model, cost, input_tokens,
    output_tokens, cached_input_tokens, cache_write_tokens, reasoning_tokens, tags
)`;

const TOKEN_COLUMNS = [
  'input_tokens',
  'output_tokens',
  'cached_input_tokens',
  'cache_write_tokens',
  'reasoning_tokens',
];

const UPSERT_DAILY = `daily AS (
  INSERT INTO usage_daily AS d (account_id, day, provider, model, spend, requests, ${TOKEN_COLUMNS.join(', ')})
  SELECT account_id, day, provider, model, sum(cost), count(*), ${TOKEN_COLUMNS.map((c) => `sum(${c})`).join(', ')}
  FROM ins GROUP BY account_id, day, provider, model
  ORDER BY account_id, day, provider, model
  ON CONFLICT (account_id, day, provider, model) DO UPDATE SET
    spend = d.spend + EXCLUDED.spend, requests = d.requests + EXCLUDED.requests,
    ${TOKEN_COLUMNS.map((c) => `${c} = d.${c} + EXCLUDED.${c}`).join(', ')}
  RETURNING 1
)`;

// A value already rolled up that day keeps its row; a new one gets a row while the key has
// fewer than the cap (rows already there + its rank among this batch's new values), else it
// is added to the overflow row. Totals per key stay exact either way.
const UPSERT_TAGS = `tag_groups AS (
  SELECT i.account_id, i.day, t.key AS tag_key, t.value AS tag_value, sum(i.cost) AS spend, count(*) AS requests
  FROM ins i CROSS JOIN LATERAL jsonb_each_text(i.tags) AS t(key, value)
  GROUP BY 1, 2, 3, 4
), tag_known AS (
  SELECT g.*, (g.tag_value = '${TAG_OVERFLOW_VALUE}' OR EXISTS (
    SELECT 1 FROM usage_tag_daily u WHERE u.account_id = g.account_id AND u.day = g.day
      AND u.tag_key = g.tag_key AND u.tag_value = g.tag_value)) AS known
  FROM tag_groups g
), tag_capped AS (
  SELECT account_id, day, tag_key, spend, requests,
    CASE WHEN known THEN tag_value
      WHEN row_number() OVER (PARTITION BY account_id, day, tag_key, known ORDER BY spend DESC, tag_value)
        + (SELECT count(*) FROM (SELECT 1 FROM usage_tag_daily u WHERE u.account_id = k.account_id AND u.day = k.day
             AND u.tag_key = k.tag_key AND u.tag_value <> '${TAG_OVERFLOW_VALUE}' LIMIT ${TAG_VALUES_PER_KEY_DAY}) AS n)
        <= ${TAG_VALUES_PER_KEY_DAY} THEN tag_value
      ELSE '${TAG_OVERFLOW_VALUE}' END AS tag_value
  FROM tag_known k
), tags AS (
  INSERT INTO usage_tag_daily AS u (account_id, day, tag_key, tag_value, spend, requests)
  SELECT account_id, day, tag_key, tag_value, sum(spend), sum(requests)
  FROM tag_capped GROUP BY account_id, day, tag_key, tag_value
  ORDER BY account_id, day, tag_key, tag_value
  ON CONFLICT (account_id, day, tag_key, tag_value) DO UPDATE SET
    spend = u.spend + EXCLUDED.spend, requests = u.requests + EXCLUDED.requests
  RETURNING 1
)`;

/** With rollup tables (PostgreSQL, embedded) or without (TimescaleDB: continuous aggregates). */
export function batchSql(kind: StoreKind): string {
  if (kind === 'timescale') {
    return `WITH ${INPUT}, ${CLAIM}, ${INSERT_EVENTS}
SELECT (SELECT count(*) FROM ins)::int AS inserted`;
  }
  // The scalar subqueries run in this order: events, then daily rows, then tag rows.
  return `WITH ${INPUT}, ${CLAIM}, ${INSERT_EVENTS}, ${UPSERT_DAILY}, ${UPSERT_TAGS}
SELECT (SELECT count(*) FROM ins)::int AS inserted, (SELECT count(*) FROM daily)::int AS daily_rows,
  (SELECT count(*) FROM tags)::int AS tag_rows`;
}

export interface BatchResult {
  inserted: number;
}

export function insertBatch(db: Db, events: readonly UsageEvent[]): Promise<BatchResult> {
  return insertJson(db, JSON.stringify(events));
}

/**
 * Writes events given as one JSON array: one statement. The spool hands its batches out as
 * bytes, which pg sends in binary format (for json, that is the UTF-8 text itself) and the
 * embedded store's worker decodes: the daemon's thread never holds a batch as a string.
 * The statement is a named one: parsing and planning it (CTEs over six tables, 5 kB of text)
 * took more of the database's CPU than running it on a small batch.
 */
export async function insertJson(db: Db, json: string | Uint8Array): Promise<BatchResult> {
  const sql = batchSql(db.kind);
  const opts = { name: `meter_insert_events_${db.kind}` };
  if (db.kind !== 'timescale') return result(await db.query(sql, [json], opts));
  // The PGlite engine the tests run TimescaleDB mode on resets a connection whose statement
  // fails outside a transaction after an earlier failure (a rejected event's batch is halved).
  return result(await db.transaction((tx) => tx.query(sql, [json], opts)));
}

const result = (rows: Record<string, unknown>[]): BatchResult => ({ inserted: Number(rows[0]?.inserted ?? 0) });

/** SQLSTATE classes of errors caused by the rows themselves (bad value, constraint): retrying
 *  the same batch would fail forever, so its bad events are isolated instead. */
export function isDataError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^(22|23)[0-9A-Z]{3}$/.test(code);
}
