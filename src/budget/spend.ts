/**
 * A budget's exact spend over a window of its zone, as ONE statement (the monitor, analytics,
 * the CLI and the fleet's lease statement all run it). Windows reach SQL as instants, so the
 * database's own tz data and session TimeZone never matter.
 *
 * - The account scope over a window of whole UTC days (every UTC budget, the account budget
 *   included) reads usage_daily, as `meter budget show` and /analytics/summary do.
 * - Every other budget sums the quarter-hour rollups (sql/131) over the whole buckets inside
 *   the window, plus the raw events of a partial bucket at either edge (none in today's
 *   zones, whose midnights are all whole quarter hours).
 */
import type { Scope } from './scope.js';

const QUARTER_HOUR = 900_000;
const DAY = 86_400_000;

export interface SpendWindow {
  /** First instant (ms, inclusive) and the next window's first (exclusive). */
  start: number;
  end: number;
}

export interface SpendStatement {
  /** Returns one row `{ spend }`: NUMERIC as text, exact to 8 decimals. */
  sql: string;
  params: unknown[];
}

// A model scope matches the reported or the requested model, or a dated snapshot of either
// (modelMatches in scope.ts says the same in TypeScript).
const modelMatch = (column: string, p: string) =>
  `(${column} = ${p} OR (left(${column}, length(${p}) + 1) = ${p} || '-'
     AND substr(${column}, length(${p}) + 1) ~ '^-([0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{8}|[0-9]{4})$'))`;

/** The scope's condition on usage_quarter_hour (`raw` false) or usage_events (`raw` true). */
function scopeFilter(scope: Scope, raw: boolean, p: string): string {
  switch (scope.kind) {
    case 'account':
      return 'true';
    case 'key':
      return `key_id = ${p}`;
    case 'provider':
      return `provider = ${p}`;
    case 'model':
      return `(${modelMatch('model', p)} OR ${modelMatch(raw ? "coalesce(requested_model, '')" : 'requested_model', p)})`;
    case 'tag':
      return 'true'; // the tag table is filtered by its key columns
  }
}

const iso = (t: number) => new Date(t).toISOString();

/** The account scope over whole UTC days: the daily rollups hold it exactly. */
const wholeDays = (scope: Scope, w: SpendWindow) =>
  scope.kind === 'account' && w.start % DAY === 0 && w.end % DAY === 0;

/** The statement giving the spend of `scope` of `accountId` over `w`. */
export function spendQuery(accountId: string, scope: Scope, w: SpendWindow): SpendStatement {
  if (wholeDays(scope, w)) {
    return {
      sql: `SELECT coalesce(sum(spend), 0)::text AS spend FROM usage_daily
             WHERE account_id = $1::uuid AND day >= $2::date AND day < $3::date`,
      params: [accountId, iso(w.start).slice(0, 10), iso(w.end).slice(0, 10)],
    };
  }
  // Whole buckets in [from, to); raw events in [start, from) and [to, end).
  const from = Math.ceil(w.start / QUARTER_HOUR) * QUARTER_HOUR;
  const to = Math.max(from, Math.floor(w.end / QUARTER_HOUR) * QUARTER_HOUR);
  const params: unknown[] = [accountId, iso(from), iso(to), iso(w.start), iso(w.end)];
  const edges = `((time >= $4::timestamptz AND time < $2::timestamptz) OR (time >= $3::timestamptz AND time < $5::timestamptz))`;
  if (scope.kind === 'tag') {
    params.push(scope.key, scope.value);
    return {
      sql: `SELECT (coalesce((SELECT sum(spend) FROM usage_tag_quarter_hour
                      WHERE account_id = $1::uuid AND tag_key = $6::text AND tag_value = $7::text
                        AND bucket >= $2::timestamptz AND bucket < $3::timestamptz), 0)
                  + coalesce((SELECT sum(cost) FROM usage_events
                      WHERE account_id = $1::uuid AND ${edges} AND tags ->> $6::text = $7::text), 0))::text AS spend`,
      params,
    };
  }
  if (scope.kind !== 'account') params.push(scope.value);
  const p = '$6::text';
  return {
    sql: `SELECT (coalesce((SELECT sum(spend) FROM usage_quarter_hour
                    WHERE account_id = $1::uuid AND bucket >= $2::timestamptz AND bucket < $3::timestamptz
                      AND ${scopeFilter(scope, false, p)}), 0)
                + coalesce((SELECT sum(cost) FROM usage_events
                    WHERE account_id = $1::uuid AND ${edges} AND ${scopeFilter(scope, true, p)}), 0))::text AS spend`,
    params,
  };
}

/**
 * What a budget's spend over `w` was made of, for its alerts: its five costliest models and tag
 * values within the scope. Rollups where they hold the scope's columns (models of every scope
 * but a tag, tags of the account scope), the raw events of the window otherwise; run only when
 * a level fires.
 */
export function topQueries(
  accountId: string,
  scope: Scope,
  w: SpendWindow,
): { models: SpendStatement; tags: SpendStatement } {
  if (wholeDays(scope, w)) {
    // As the spend: the daily rollups (the account budget's month, `meter alerts test`).
    const days = [accountId, iso(w.start).slice(0, 10), iso(w.end).slice(0, 10)];
    const daily = (table: string, columns: string, group: string) =>
      `SELECT ${columns}, sum(spend)::text AS spend, sum(requests)::text AS requests FROM ${table}
        WHERE account_id = $1::uuid AND day >= $2::date AND day < $3::date
        GROUP BY ${group} ORDER BY sum(spend) DESC, ${group} LIMIT 5`;
    return {
      models: { sql: daily('usage_daily', 'provider, model', 'provider, model'), params: days },
      tags: { sql: daily('usage_tag_daily', 'tag_key AS key, tag_value AS value', 'tag_key, tag_value'), params: days },
    };
  }
  const from = Math.ceil(w.start / QUARTER_HOUR) * QUARTER_HOUR;
  const to = Math.max(from, Math.floor(w.end / QUARTER_HOUR) * QUARTER_HOUR);
  // $1 account, $2 $3 the window, then the scope's value and key, then the whole buckets.
  const scoped: unknown[] = [accountId, iso(w.start), iso(w.end)];
  if (scope.kind !== 'account') scoped.push(scope.value);
  if (scope.kind === 'tag') scoped.push(scope.key);
  const b = scoped.length;
  const rolled = [...scoped, iso(from), iso(to)];
  const raw = scope.kind === 'tag' ? 'tags ->> $5::text = $4::text' : scopeFilter(scope, true, '$4::text');
  const window = `account_id = $1::uuid AND time >= $2::timestamptz AND time < $3::timestamptz AND ${raw}`;
  const buckets = `account_id = $1::uuid AND bucket >= $${b + 1}::timestamptz AND bucket < $${b + 2}::timestamptz`;
  const edges = `account_id = $1::uuid AND ((time >= $2::timestamptz AND time < $${b + 1}::timestamptz)
                 OR (time >= $${b + 2}::timestamptz AND time < $3::timestamptz)) AND ${raw}`;
  const top = (rows: string, group: string) =>
    `SELECT ${group}, sum(spend)::text AS spend, sum(requests)::text AS requests FROM (${rows}) r
      GROUP BY ${group} ORDER BY sum(spend) DESC, ${group} LIMIT 5`;
  const eventTags = `SELECT t.key, t.value, e.cost AS spend, 1 AS requests FROM usage_events e
      CROSS JOIN LATERAL jsonb_each_text(e.tags) AS t(key, value)`;
  const models: SpendStatement =
    scope.kind === 'tag'
      ? {
          sql: top(
            `SELECT provider, model, cost AS spend, 1 AS requests FROM usage_events WHERE ${window}`,
            'provider, model',
          ),
          params: scoped,
        }
      : {
          sql: top(
            `SELECT provider, model, spend, requests FROM usage_quarter_hour
              WHERE ${buckets} AND ${scopeFilter(scope, false, '$4::text')}
             UNION ALL SELECT provider, model, cost, 1 FROM usage_events WHERE ${edges}`,
            'provider, model',
          ),
          params: rolled,
        };
  const tags: SpendStatement =
    scope.kind === 'account'
      ? {
          sql: top(
            `SELECT tag_key AS key, tag_value AS value, spend, requests FROM usage_tag_quarter_hour WHERE ${buckets}
             UNION ALL ${eventTags} WHERE ${edges}`,
            'key, value',
          ),
          params: rolled,
        }
      : { sql: top(`${eventTags} WHERE ${window}`, 'key, value'), params: scoped };
  return { models, tags };
}
