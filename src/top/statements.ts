/**
 * Every statement `meter top` runs, by name, with the kind of each parameter. Named and
 * parameterised so the daemon's admin API can run exactly these for a CLI on the embedded store
 * (and nothing else), after checking each parameter against its kind. No Ink or React here:
 * the daemon may import this file.
 *
 * Costs, at any table size: the rollups (usage_daily, usage_tag_daily) are read for one account
 * and one month; raw events are read only through usage_events_account_recorded (sql/060), from
 * a cursor on recorded_at (when the row was written) onwards.
 * Instants travel as integer microseconds since the epoch (exact, unlike a JS Date).
 */

import type { BudgetView } from '../budget/status.js';
import { ACCOUNT_BUDGET_SQL } from '../budget/definitions.js';

export type ParamKind = 'uuid' | 'date' | 'month' | 'text' | 'int' | 'uuid[]';

export interface NamedStatement {
  readonly sql: string;
  readonly params: readonly ParamKind[];
}

/** `$n` microseconds since the epoch as a timestamptz, exactly. */
const at = (n: number) => `('epoch'::timestamptz + $${n}::bigint * interval '1 microsecond')`;
const micros = (col: string) => `(extract(epoch FROM ${col}) * 1000000)::bigint::text`;

/** The month's rollups of one account: $1 account, [$2, $3) its UTC days. */
const MONTH_DAYS = 'account_id = $1::uuid AND day >= $2::date AND day < $3::date';

const EVENT_COLUMNS = `event_id::text AS event_id, ${micros('recorded_at')} AS recorded_us, ${micros('time')} AS time_us,
  provider, model, status, input_tokens::text AS input_tokens, output_tokens::text AS output_tokens,
  cost::text AS cost, usage_source, unpriced, latency_ms, tags`;

export const TOP_STATEMENTS = {
  /** Every account, by name (the `a` key cycles through them). */
  'top.accounts': {
    sql: 'SELECT id::text AS id, name, plan FROM accounts ORDER BY name',
    params: [],
  },
  /** The month's spend and calls, budget, hard cap, levels fired, and the database's clock. */
  'top.month': {
    sql: `SELECT coalesce(m.spend, 0)::text AS spend, coalesce(m.requests, 0)::text AS requests,
       b.amount::text AS budget, coalesce(b.action = 'block' AND p.hard_cap, false) AS hard_cap,
       coalesce((SELECT array_agg(f.level::int ORDER BY f.level) FROM budget_levels_fired f
                 WHERE f.budget_id = b.id AND f.window_start = ($4::text || '-01')::timestamp AT TIME ZONE 'UTC'),
                '{}'::int[]) AS levels_fired,
       ${micros('clock_timestamp()')} AS db_now_us
FROM accounts a
JOIN plans p ON p.name = a.plan
LEFT JOIN budgets b ON b.account_id = a.id AND ${ACCOUNT_BUDGET_SQL('b')}
CROSS JOIN (SELECT sum(spend) AS spend, sum(requests) AS requests FROM usage_daily WHERE ${MONTH_DAYS}) m
WHERE a.id = $1::uuid`,
    params: ['uuid', 'date', 'date', 'month'],
  },
  /** The month's spend and calls by provider and model, by spend. */
  'top.by_model': {
    sql: `SELECT provider, model, sum(spend)::text AS spend, sum(requests)::text AS requests
FROM usage_daily WHERE ${MONTH_DAYS}
GROUP BY provider, model ORDER BY sum(spend) DESC, sum(requests) DESC, provider, model LIMIT $4`,
    params: ['uuid', 'date', 'date', 'int'],
  },
  /** The tag keys the account used this month, by name (the `t` key cycles through them). */
  'top.tag_keys': {
    // the key with the most spend first: the one shown until `t` picks another
    sql: `SELECT tag_key FROM usage_tag_daily WHERE ${MONTH_DAYS}
           GROUP BY tag_key ORDER BY sum(spend) DESC, tag_key LIMIT 50`,
    params: ['uuid', 'date', 'date'],
  },
  /** The month's spend and calls by the values of tag $4, by spend; calls without the tag are
   *  the account's total minus the tagged sum (exact in NUMERIC), value NULL. */
  'top.by_tag': {
    sql: `WITH tagged AS (
  SELECT tag_value AS value, sum(spend) AS spend, sum(requests) AS requests
  FROM usage_tag_daily WHERE ${MONTH_DAYS} AND tag_key = $4 GROUP BY tag_value
), untagged AS (
  SELECT NULL::text AS value, t.spend - coalesce((SELECT sum(spend) FROM tagged), 0) AS spend,
         t.requests - coalesce((SELECT sum(requests) FROM tagged), 0) AS requests
  FROM (SELECT coalesce(sum(spend), 0) AS spend, coalesce(sum(requests), 0) AS requests FROM usage_daily WHERE ${MONTH_DAYS}) t
)
SELECT g.value, g.spend::text AS spend, g.requests::text AS requests
FROM (SELECT * FROM tagged UNION ALL SELECT * FROM untagged WHERE requests > 0 OR spend <> 0) g
ORDER BY g.spend DESC, g.requests DESC, g.value ASC NULLS LAST LIMIT $5`,
    params: ['uuid', 'date', 'date', 'text', 'int'],
  },
  /** Spend and calls per minute of recorded_at in ($2, $3]: the sparkline and burn rates at start. */
  'top.minutes': {
    sql: `SELECT floor(extract(epoch FROM recorded_at) / 60)::bigint::text AS minute, sum(cost)::text AS spend, count(*)::text AS calls
FROM usage_events WHERE account_id = $1::uuid AND recorded_at > ${at(2)} AND recorded_at <= ${at(3)}
GROUP BY 1`,
    params: ['uuid', 'int', 'int'],
  },
  /** The newest events recorded in ($2, $3], newest first: the tail and window at start. */
  'top.events_before': {
    sql: `SELECT ${EVENT_COLUMNS} FROM usage_events
WHERE account_id = $1::uuid AND recorded_at > ${at(2)} AND recorded_at <= ${at(3)}
ORDER BY recorded_at DESC LIMIT $4`,
    params: ['uuid', 'int', 'int', 'int'],
  },
  /** Events recorded after $2, oldest first, except the ids in $3 (already seen): the cursor. */
  'top.events_since': {
    sql: `SELECT ${EVENT_COLUMNS} FROM usage_events
WHERE account_id = $1::uuid AND recorded_at > ${at(2)} AND event_id <> ALL($3::uuid[])
ORDER BY recorded_at LIMIT $4`,
    params: ['uuid', 'int', 'uuid[]', 'int'],
  },
  /** The month's reconciliation per provider (CONTRACT §7): the account's own results when it
   *  has a mapping, the organisation's when it is the store's one account (as the endpoint). */
  'top.reconciliation': {
    sql: `SELECT r.provider, sum(r.provider_cost)::text AS provider_cost, sum(r.meter_cost)::text AS meter_cost,
       count(*) FILTER (WHERE r.provider_cost IS NULL)::int AS unknown
FROM reconcile_results r
WHERE r.day >= $2::date AND r.day < $3::date
  AND r.scope = CASE WHEN EXISTS (SELECT 1 FROM reconcile_mappings m WHERE m.account_id = $1::uuid AND m.provider = r.provider)
                     THEN $1::text WHEN (SELECT count(*) FROM accounts) = 1 THEN '' END
GROUP BY r.provider ORDER BY r.provider`,
    params: ['uuid', 'date', 'date'],
  },
} as const satisfies Record<string, NamedStatement>;

export type TopStatementName = keyof typeof TOP_STATEMENTS;

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const CHECKS: Record<ParamKind, (v: unknown) => boolean> = {
  uuid: (v) => typeof v === 'string' && UUID_RE.test(v),
  date: (v) => typeof v === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(v),
  month: (v) => typeof v === 'string' && /^\d{4}-\d{2}$/.test(v),
  text: (v) => typeof v === 'string' && v.length <= 256,
  int: (v) => (typeof v === 'string' && /^-?\d{1,18}$/.test(v)) || (typeof v === 'number' && Number.isSafeInteger(v)),
  'uuid[]': (v) => Array.isArray(v) && v.length <= 100_000 && v.every((x) => CHECKS.uuid(x)),
};

/** Why `params` do not fit the statement's parameter kinds, or undefined when they do. */
export function checkParams(statement: NamedStatement, params: readonly unknown[]): string | undefined {
  if (params.length !== statement.params.length) {
    return `expected ${statement.params.length} parameters, got ${params.length}`;
  }
  const bad = statement.params.findIndex((kind, i) => !CHECKS[kind](params[i]));
  return bad < 0 ? undefined : `parameter $${bad + 1} must be a ${statement.params[bad]}`;
}

/** Where top's statements run: only the named ones above (a connection, or a daemon's admin API). */
export interface TopSource {
  run<T>(name: TopStatementName, params: unknown[]): Promise<T[]>;
  /** Every budget of the account in its current window (`meter budgets list`); absent: none shown. */
  budgets?(account: string): Promise<BudgetView[]>;
  close(): Promise<void>;
}
