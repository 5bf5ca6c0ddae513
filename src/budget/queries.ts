import type { TopModel, TopTag } from '../alerts/alert.js';
import type { Queryable } from '../store/types.js';
import type { MonthWindow } from '../calendar.js';

/** The levels of CONTRACT §6, in the order they fire. */
export const LEVELS = [50, 80, 100] as const;

export interface BudgetRow {
  account_id: string;
  account: string;
  /** NUMERIC as text. */
  budget: string;
  /** The budget's flag while the account's plan includes the hard cap (a downgrade turns it off). */
  hard_cap: boolean;
  /** Month-to-date spend from usage_daily, NUMERIC as text. */
  spend: string;
  fired: number[];
}

/** Every budgeted account with its month-to-date spend and the levels already fired this month:
 *  one statement, so budget, spend and fired levels are one consistent snapshot. */
export function loadBudgetStates(db: Queryable, w: MonthWindow, accountName?: string): Promise<BudgetRow[]> {
  const { sql, params } = budgetStatesQuery(w, accountName);
  return db.query<BudgetRow>(sql, params);
}

/** Every budget (or one account's, or those of some account ids) with its month-to-date spend
 *  and the levels fired. */
export function budgetStatesQuery(
  w: MonthWindow,
  accountName?: string,
  accountIds?: string[],
): { sql: string; params: unknown[] } {
  return {
    sql: `SELECT b.account_id, a.name AS account, b.monthly_usd AS budget, (b.hard_cap AND p.hard_cap) AS hard_cap,
            COALESCE((SELECT sum(u.spend) FROM usage_daily u
                      WHERE u.account_id = b.account_id AND u.day >= $1::date AND u.day < $2::date), 0) AS spend,
            COALESCE((SELECT array_agg(f.level::int ORDER BY f.level) FROM alert_levels_fired f
                      WHERE f.account_id = b.account_id AND f.month = $3), '{}'::int[]) AS fired
       FROM budgets b JOIN accounts a ON a.id = b.account_id JOIN plans p ON p.name = a.plan
      WHERE ($4::text IS NULL OR a.name = $4::text) AND ($5::uuid[] IS NULL OR b.account_id = ANY($5::uuid[]))`,
    params: [w.from, w.to, w.month, accountName ?? null, accountIds ?? null],
  };
}

/** The month's most expensive models of an account, for the alert payload. */
export function topModels(db: Queryable, accountId: string, w: MonthWindow, limit = 5): Promise<TopModel[]> {
  return db.query<TopModel>(
    `SELECT provider, model, sum(spend) AS spend, sum(requests)::text AS requests FROM usage_daily
      WHERE account_id = $1 AND day >= $2::date AND day < $3::date
      GROUP BY provider, model ORDER BY sum(spend) DESC, provider, model LIMIT $4`,
    [accountId, w.from, w.to, limit],
  );
}

/** The month's most expensive tag values (any key) of an account, for the alert payload. */
export function topTags(db: Queryable, accountId: string, w: MonthWindow, limit = 5): Promise<TopTag[]> {
  return db.query<TopTag>(
    `SELECT tag_key AS key, tag_value AS value, sum(spend) AS spend, sum(requests)::text AS requests FROM usage_tag_daily
      WHERE account_id = $1 AND day >= $2::date AND day < $3::date
      GROUP BY tag_key, tag_value ORDER BY sum(spend) DESC, tag_key, tag_value LIMIT $4`,
    [accountId, w.from, w.to, limit],
  );
}

export interface FireLevel {
  accountId: string;
  month: string;
  level: number;
  eventId: string;
  spend: string;
  budget: string;
  /** The alert as the outbox stores it. */
  payload: unknown;
}

/**
 * Fires one level, once per account and month across every sidecar: the primary key of
 * alert_levels_fired lets exactly one INSERT win, and the deliveries (one per channel) are
 * enqueued by that same statement, so a loser enqueues nothing. The budget must still be the
 * one the level was computed from (a concurrent `budget set` re-arms levels).
 */
export async function fireLevel(db: Queryable, f: FireLevel): Promise<{ fired: boolean; queued: number }> {
  const [row] = await db.query<{ fired: number; queued: number }>(
    `WITH fired AS (
       INSERT INTO alert_levels_fired (account_id, month, level, event_id, spend, budget)
       SELECT $1::uuid, $2::text, $3::smallint, $4::uuid, $5::numeric, $6::numeric
        WHERE EXISTS (SELECT 1 FROM budgets WHERE account_id = $1::uuid AND monthly_usd = $6::numeric)
       ON CONFLICT DO NOTHING
       RETURNING account_id, event_id
     ), queued AS (
       INSERT INTO alert_deliveries (event_id, channel_id, account_id, payload)
       SELECT f.event_id, c.id, f.account_id, $7::jsonb FROM fired f JOIN alert_channels c ON c.account_id = f.account_id
       RETURNING 1
     )
     SELECT (SELECT count(*) FROM fired)::int AS fired, (SELECT count(*) FROM queued)::int AS queued`,
    [f.accountId, f.month, f.level, f.eventId, f.spend, f.budget, JSON.stringify(f.payload)],
  );
  return { fired: (row?.fired ?? 0) > 0, queued: row?.queued ?? 0 };
}
