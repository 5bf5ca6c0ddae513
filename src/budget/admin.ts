import type { Queryable } from '../store/types.js';
import { formatUnits, toUnits, utilizationPct } from '../money.js';
import { currentMonth, type MonthWindow } from '../calendar.js';
import { MeterError } from '../errors.js';
import { unknownAccount } from '../auth/accounts.js';

/**
 * What `meter budget …` does to the store. Each write is ONE statement: CLI commands may run
 * through a daemon's admin API, which has no transactions.
 */

/** A user error: printed as one line by the CLI. */
export class BudgetAdminError extends MeterError {
  override name = 'BudgetAdminError';
}

export interface BudgetView {
  account: string;
  month: string;
  /** Decimal text; null when no budget is set. */
  budget: string | null;
  hard_cap: boolean;
  spend: string;
  utilization_pct: string | null;
  levels_fired: number[];
}

export interface SetBudgetResult {
  plan: string;
  /** Levels fired earlier this month that are above the new utilisation and will fire again. */
  rearmed: number[];
}

/**
 * Sets (or replaces) an account's monthly budget. `hardCap` undefined keeps the cap as it is (off
 * for a new budget): changing the amount must not silently turn a cap off. `--hard-cap` is
 * refused unless the plan has plans.hard_cap. Changing the budget re-arms this month's fired levels that lie above the new
 * utilisation (a raised budget alerts again at 80% of the new amount), in the same statement.
 */
export async function setBudget(
  db: Queryable,
  account: string,
  monthlyUsd: string,
  hardCap: boolean | undefined,
  now = new Date(),
): Promise<SetBudgetResult> {
  const w = currentMonth(now);
  const [row] = await db.query<{ plan: string; plan_hard_cap: boolean; saved: number; rearmed: number[] }>(
    `WITH acct AS (
       SELECT a.id, a.plan, p.hard_cap AS plan_hard_cap FROM accounts a JOIN plans p ON p.name = a.plan WHERE a.name = $1
     ), saved AS (
       INSERT INTO budgets (account_id, monthly_usd, hard_cap)
       SELECT id, $2::numeric, COALESCE($3::boolean, false) FROM acct WHERE plan_hard_cap OR $3::boolean IS NOT TRUE
       ON CONFLICT (account_id) DO UPDATE
         SET monthly_usd = EXCLUDED.monthly_usd, hard_cap = COALESCE($3::boolean, budgets.hard_cap), updated_at = now()
       RETURNING account_id, monthly_usd
     ), spend AS (
       SELECT COALESCE(sum(u.spend), 0) AS total FROM usage_daily u
        WHERE u.account_id = (SELECT id FROM acct) AND u.day >= $4::date AND u.day < $5::date
     ), rearmed AS (
       DELETE FROM alert_levels_fired f USING saved s, spend
        WHERE f.account_id = s.account_id AND f.month = $6 AND f.level * s.monthly_usd > spend.total * 100
       RETURNING f.level
     )
     SELECT plan, plan_hard_cap, (SELECT count(*) FROM saved)::int AS saved,
            COALESCE((SELECT array_agg(level::int ORDER BY level) FROM rearmed), '{}'::int[]) AS rearmed
       FROM acct`,
    [account, monthlyUsd, hardCap ?? null, w.from, w.to, w.month],
  );
  if (!row) throw unknownAccount(account);
  if (row.saved === 0) {
    throw new BudgetAdminError(
      `--hard-cap is not available on the ${row.plan} plan of account "${account}": ` +
        `it needs a plan with a hard cap (e.g. \`meter accounts set-plan ${account} pro\`), or set the budget without --hard-cap`,
    );
  }
  return { plan: row.plan, rearmed: row.rearmed };
}

/** The account's budget, month-to-date spend and the levels fired this month. */
export async function showBudget(db: Queryable, account: string, now = new Date()): Promise<BudgetView> {
  const w = currentMonth(now);
  const [row] = await db.query<{ budget: string | null; hard_cap: boolean; spend: string; fired: number[] }>(
    `SELECT b.monthly_usd AS budget, COALESCE(b.hard_cap AND p.hard_cap, false) AS hard_cap,
            COALESCE((SELECT sum(u.spend) FROM usage_daily u
                      WHERE u.account_id = a.id AND u.day >= $2::date AND u.day < $3::date), 0) AS spend,
            COALESCE((SELECT array_agg(f.level::int ORDER BY f.level) FROM alert_levels_fired f
                      WHERE f.account_id = a.id AND f.month = $4), '{}'::int[]) AS fired
       FROM accounts a JOIN plans p ON p.name = a.plan LEFT JOIN budgets b ON b.account_id = a.id
      WHERE a.name = $1`,
    [account, w.from, w.to, w.month],
  );
  if (!row) throw unknownAccount(account);
  return budgetView(account, w, row);
}

function budgetView(
  account: string,
  w: MonthWindow,
  row: { budget: string | null; hard_cap: boolean; spend: string; fired: number[] },
): BudgetView {
  const spend = toUnits(row.spend);
  const budget = row.budget === null ? null : toUnits(row.budget);
  return {
    account,
    month: w.month,
    budget: budget === null ? null : formatUnits(budget),
    hard_cap: row.hard_cap,
    spend: formatUnits(spend),
    utilization_pct: budget === null ? null : utilizationPct(spend, budget),
    levels_fired: row.fired,
  };
}

/** Removes the budget; false when the account had none. Fired levels stay: setting the same
 *  budget again must not repeat alerts already sent this month. */
export async function clearBudget(db: Queryable, account: string): Promise<boolean> {
  const [row] = await db.query<{ cleared: number }>(
    `WITH acct AS (SELECT id FROM accounts WHERE name = $1),
          cleared AS (DELETE FROM budgets WHERE account_id = (SELECT id FROM acct) RETURNING 1)
     SELECT (SELECT count(*) FROM cleared)::int AS cleared FROM acct`,
    [account],
  );
  if (!row) throw unknownAccount(account);
  return row.cleared > 0;
}
