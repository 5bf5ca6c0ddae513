/**
 * Where /analytics/summary reads an account's monthly budget. Budgets arrive in a later issue
 * with a `budgets` table; until it exists the summary says `budget: null, hard_cap: false`.
 * Either way the summary joins one derived table `b(budget, hard_cap)` of exactly one row, so
 * the budgets feature changes nothing here but this fragment.
 *
 * Expected shape once it exists: budgets(account_id uuid, monthly_usd numeric(20,8), hard_cap boolean).
 */
import type { Queryable } from '../store/types.js';

/** `$1` is the account id in the summary query. */
const WITH_BUDGETS = `(SELECT bg.monthly_usd AS budget, bg.hard_cap
   FROM (SELECT 1) AS one LEFT JOIN budgets AS bg ON bg.account_id = $1)`;
const WITHOUT_BUDGETS = `(SELECT NULL::numeric AS budget, NULL::boolean AS hard_cap)`;

/** Re-checked now and then: migrations run at start, but a long-lived daemon should not need a
 *  restart to notice the table once another process has migrated the database. */
const RECHECK_MS = 60_000;

export function budgetSource(db: Queryable, now: () => number = Date.now): () => Promise<string> {
  let cached: { sql: string; at: number } | undefined;
  return async () => {
    if (cached && (cached.sql === WITH_BUDGETS || now() - cached.at < RECHECK_MS)) return cached.sql;
    const [row] = await db.query<{ exists: boolean }>(`SELECT to_regclass('budgets') IS NOT NULL AS exists`);
    cached = { sql: row?.exists ? WITH_BUDGETS : WITHOUT_BUDGETS, at: now() };
    return cached.sql;
  };
}
