/**
 * daily, summary and by-tag: read only the rollups (usage_daily, usage_tag_daily), never raw
 * events (but for the summary's unpriced count, from a partial index of unpriced events only) (DESIGN "Storage": ~1 ms on rollups, hundreds of ms on raw events at 5M rows). Sums
 * stay NUMERIC in SQL and reach the JSON as their decimal text (json.ts).
 */
import type { Queryable } from '../store/types.js';
import { addDays, currentMonth, currentPeriod, dailyWindow, type Period } from '../calendar.js';
import { integer, money, toUnits, utilizationPct, type JsonValue } from '../money.js';
import { ACCOUNT_BUDGET_SQL } from '../budget/definitions.js';

// Every window is a half-open range of UTC days, [$2, $3).

const DAILY_SQL = `
SELECT to_char(w.day, 'YYYY-MM-DD') AS date,
       coalesce(s.spend, 0)::text AS spend,
       coalesce(s.requests, 0)::text AS requests
FROM (SELECT $2::date + i AS day FROM generate_series(0, $3::date - $2::date - 1) AS i) AS w
LEFT JOIN (
  SELECT day, sum(spend) AS spend, sum(requests) AS requests
  FROM usage_daily
  WHERE account_id = $1 AND day >= $2::date AND day < $3::date
  GROUP BY day
) AS s ON s.day = w.day
ORDER BY w.day`;

export async function daily(db: Queryable, accountId: string, now: Date, days: number): Promise<JsonValue> {
  const { from, to } = dailyWindow(now, days);
  const rows = await db.query<{ date: string; spend: string; requests: string }>(DAILY_SQL, [
    accountId,
    from,
    addDays(to, 1),
  ]);
  return { days: rows.map((r) => ({ date: r.date, spend: money(r.spend), requests: integer(r.requests) })) };
}

/** The month's totals and the account budget (scope account, window month, zone UTC: CONTRACT
 *  §6), however it was made. A hard cap (action block) counts only while the plan has one
 *  (plans.hard_cap), as `meter budget show` says. `(SELECT 1)` keeps one row. */
const SUMMARY_TOTALS_SQL = `
SELECT coalesce((SELECT sum(spend) FROM usage_daily
                 WHERE account_id = $1 AND day >= $2::date AND day < $3::date), 0)::text AS spend,
       coalesce((SELECT sum(requests) FROM usage_daily
                 WHERE account_id = $1 AND day >= $2::date AND day < $3::date), 0)::text AS requests,
       b.amount::text AS budget,
       coalesce(b.action = 'block' AND p.hard_cap, false) AS hard_cap
FROM (SELECT 1) AS one
LEFT JOIN budgets AS b ON b.account_id = $1 AND ${ACCOUNT_BUDGET_SQL('b')}
LEFT JOIN accounts AS a ON a.id = b.account_id
LEFT JOIN plans AS p ON p.name = a.plan`;

const SUMMARY_BY_MODEL_SQL = `
SELECT provider, model,
       sum(spend)::text AS spend, sum(requests)::text AS requests,
       sum(input_tokens)::text AS input_tokens, sum(output_tokens)::text AS output_tokens
FROM usage_daily
WHERE account_id = $1 AND day >= $2::date AND day < $3::date
GROUP BY provider, model
ORDER BY sum(spend) DESC, sum(requests) DESC, provider, model`;

interface TotalsRow {
  spend: string;
  requests: string;
  budget: string | null;
  hard_cap: boolean;
}

/** The month's calls recorded without a price: the one raw-event read of the summary, through
 *  the small partial index of sql/030 (only unpriced rows are in it). Counts what is still held
 *  as raw events, i.e. what `meter pricing reprice` can still price. */
const UNPRICED_SQL = `
SELECT count(*)::text AS n FROM usage_events
WHERE account_id = $1 AND unpriced
  AND time >= $2::date::timestamp AT TIME ZONE 'UTC' AND time < $3::date::timestamp AT TIME ZONE 'UTC'`;
interface ModelRow {
  provider: string;
  model: string;
  spend: string;
  requests: string;
  input_tokens: string;
  output_tokens: string;
}

export async function summary(db: Queryable, accountId: string, now: Date): Promise<JsonValue> {
  const { month, from, to } = currentMonth(now);
  const params = [accountId, from, to];
  const [totals, models, unpriced] = await Promise.all([
    db.query<TotalsRow>(SUMMARY_TOTALS_SQL, params),
    db.query<ModelRow>(SUMMARY_BY_MODEL_SQL, params),
    db.query<{ n: string }>(UNPRICED_SQL, params),
  ]);
  const t = totals[0]!;
  return {
    month,
    spend: money(t.spend),
    requests: integer(t.requests),
    unpriced_requests: integer(unpriced[0]?.n ?? '0'),
    budget: t.budget === null ? null : money(t.budget),
    // Truncated to 2 decimals like `meter budget show` and the alerts: never rounds up to a level.
    budget_utilization_pct: t.budget === null ? null : money(utilizationPct(toUnits(t.spend), toUnits(t.budget))),
    hard_cap: t.hard_cap,
    by_model: models.map((m) => ({
      provider: m.provider,
      model: m.model,
      spend: money(m.spend),
      requests: integer(m.requests),
      input_tokens: integer(m.input_tokens),
      output_tokens: integer(m.output_tokens),
    })),
  };
}

/** Tagged groups from usage_tag_daily; the untagged remainder is the account's total from
 *  usage_daily minus the tagged sum (exact in NUMERIC), present only when calls lacked the tag. */
const BY_TAG_SQL = `
WITH tagged AS (
  SELECT tag_value AS value, sum(spend) AS spend, sum(requests) AS requests
  FROM usage_tag_daily
  WHERE account_id = $1 AND tag_key = $2 AND day >= $3::date AND day < $4::date
  GROUP BY tag_value
), total AS (
  SELECT coalesce(sum(spend), 0) AS spend, coalesce(sum(requests), 0) AS requests
  FROM usage_daily
  WHERE account_id = $1 AND day >= $3::date AND day < $4::date
), untagged AS (
  SELECT NULL::text AS value,
         total.spend - coalesce((SELECT sum(spend) FROM tagged), 0) AS spend,
         total.requests - coalesce((SELECT sum(requests) FROM tagged), 0) AS requests
  FROM total
)
SELECT g.value, g.spend::text AS spend, g.requests::text AS requests
FROM (SELECT * FROM tagged UNION ALL SELECT * FROM untagged WHERE requests > 0 OR spend <> 0) AS g
ORDER BY g.spend DESC, g.requests DESC, g.value ASC NULLS LAST -- g.: the numbers, not their text`;

export async function byTag(
  db: Queryable,
  accountId: string,
  now: Date,
  key: string,
  period: Period,
): Promise<JsonValue> {
  const { from, to } = currentPeriod(now, period);
  const rows = await db.query<{ value: string | null; spend: string; requests: string }>(BY_TAG_SQL, [
    accountId,
    key,
    from,
    to,
  ]);
  return {
    key,
    period,
    from,
    to,
    groups: rows.map((r) => ({ value: r.value, spend: money(r.spend), requests: integer(r.requests) })),
  };
}
