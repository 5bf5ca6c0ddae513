/**
 * `meter budget set|show|clear`: shorthands for the account budget, the one budget of scope
 * account, window month, zone UTC (CONTRACT §6; `meter budgets` sees it as any other). `set`
 * changes that budget whether `budget set` or `budgets create` made it. Each write is ONE
 * statement: CLI commands may run through a daemon's admin API, which has no transactions.
 */
import { randomBytes } from 'node:crypto';
import type { Queryable } from '../store/types.js';
import { formatUnits, utilizationPct } from '../money.js';
import { currentMonth } from '../calendar.js';
import { MeterError } from '../errors.js';
import { unknownAccount } from '../auth/accounts.js';
import { ACCOUNT_BUDGET_SQL, loadAccountBudget } from './definitions.js';
import { budgetStatus, currentWindow, readSpend } from './status.js';

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
  /** The account budget's id (`meter budgets show <id>`). */
  id: string;
  /** Levels fired earlier this month that are above the new utilisation and will fire again. */
  rearmed: number[];
}

const MONTH_UTC = { window: 'month', timezone: 'UTC' } as const;

/**
 * Sets the account budget's amount, creating the budget (levels 50,80,100) when there is none.
 * `hardCap` true makes its action block, false alert; undefined keeps the action as it is
 * (alert for a new budget): changing the amount must not silently turn a cap off. Block is
 * refused unless the plan has plans.hard_cap. Levels fired this month above the new
 * utilisation are re-armed (a raised budget alerts again at 80% of the new amount), in the
 * same statement.
 */
export async function setBudget(
  db: Queryable,
  account: string,
  monthlyUsd: string,
  hardCap: boolean | undefined,
  now = new Date(),
): Promise<SetBudgetResult> {
  const w = currentWindow(MONTH_UTC, now.getTime());
  const [row] = await db.query<{ plan: string; id: string | null; rearmed: number[] }>(
    `WITH acct AS (
       SELECT a.id, a.plan, p.hard_cap AS plan_hard_cap FROM accounts a JOIN plans p ON p.name = a.plan WHERE a.name = $1
     ), saved AS (
       INSERT INTO budgets (id, account_id, scope_kind, window_kind, timezone, amount, action)
       SELECT $4, id, 'account', 'month', 'UTC', $2::numeric, CASE WHEN $3::boolean THEN 'block' ELSE 'alert' END
         FROM acct WHERE plan_hard_cap OR $3::boolean IS NOT TRUE
       ON CONFLICT (account_id) WHERE scope_kind = 'account' AND window_kind = 'month' AND timezone = 'UTC' DO UPDATE
         SET amount = EXCLUDED.amount, updated_at = now(),
             action = CASE WHEN $3::boolean IS NULL THEN budgets.action ELSE EXCLUDED.action END
       RETURNING id, account_id, amount
     ), spend AS (
       SELECT COALESCE(sum(u.spend), 0) AS total FROM usage_daily u
        WHERE u.account_id = (SELECT id FROM acct) AND u.day >= $5::date AND u.day < $6::date
     ), rearmed AS (
       DELETE FROM budget_levels_fired f USING saved s, spend
        WHERE f.budget_id = s.id AND f.window_start = $7::timestamptz AND f.level * s.amount > spend.total * 100
       RETURNING f.level
     )
     SELECT plan, (SELECT id FROM saved) AS id,
            COALESCE((SELECT array_agg(level::int ORDER BY level) FROM rearmed), '{}'::int[]) AS rearmed
       FROM acct`,
    [
      account,
      monthlyUsd,
      hardCap ?? null,
      randomBytes(6).toString('hex'),
      isoDay(w.start),
      isoDay(w.end),
      new Date(w.start).toISOString(),
    ],
  );
  if (!row) throw unknownAccount(account);
  if (row.id === null) {
    throw new BudgetAdminError(
      `--hard-cap is not available on the ${row.plan} plan of account "${account}": ` +
        `it needs a plan with a hard cap (e.g. \`meter accounts set-plan ${account} pro\`), or set the budget without --hard-cap`,
    );
  }
  return { plan: row.plan, id: row.id, rearmed: row.rearmed };
}

const isoDay = (t: number) => new Date(t).toISOString().slice(0, 10);

/** The account budget, month-to-date spend and the levels fired this month (as `budgets show`
 *  reads them); the spend alone when the account has no account budget. */
export async function showBudget(db: Queryable, account: string, now = new Date()): Promise<BudgetView> {
  const found = await loadAccountBudget(db, account);
  if (!found) throw unknownAccount(account);
  const month = currentMonth(now).month;
  if (!found.def) {
    const window = currentWindow(MONTH_UTC, now.getTime());
    const spend = await readSpend(
      db,
      { accountId: found.accountId, scope: { kind: 'account', key: null, value: null } },
      window,
    );
    return { account, month, budget: null, hard_cap: false, spend, utilization_pct: null, levels_fired: [] };
  }
  const s = await budgetStatus(db, found.def, now.getTime());
  return {
    account,
    month,
    budget: found.def.amount,
    hard_cap: found.def.action === 'block' && found.def.enforced,
    spend: formatUnits(s.spendUnits),
    utilization_pct: utilizationPct(s.spendUnits, found.def.amountUnits),
    levels_fired: s.levelsFired,
  };
}

/** Deletes the account budget, and with it the levels it fired; false when there was none. */
export async function clearBudget(db: Queryable, account: string): Promise<boolean> {
  const [row] = await db.query<{ cleared: number }>(
    `WITH acct AS (SELECT id FROM accounts WHERE name = $1),
          cleared AS (DELETE FROM budgets b WHERE b.account_id = (SELECT id FROM acct) AND ${ACCOUNT_BUDGET_SQL('b')}
                      RETURNING 1)
     SELECT (SELECT count(*) FROM cleared)::int AS cleared FROM acct`,
    [account],
  );
  if (!row) throw unknownAccount(account);
  return row.cleared > 0;
}
