/**
 * Budget definitions as the daemon and the CLI read them: every row of `budgets` (sql/130,
 * sql/170), with the account's name and whether its plan enforces `block` (the hard cap is Pro
 * only; a downgrade leaves a block budget alerting).
 */
import type { WindowKind } from '../calendar.js';
import { formatUnits, toUnits } from '../money.js';
import type { Queryable } from '../store/types.js';
import type { BudgetAction, Scope, ScopeKind } from './scope.js';

/** The account budget (CONTRACT §6: `meter budget set|show|clear`) is the budget of scope account,
 *  window month, zone UTC; an account has at most one (sql/170's unique index). */
export const isAccountBudget = (d: { scope: { kind: string }; window: string; timezone: string }): boolean =>
  d.scope.kind === 'account' && d.window === 'month' && d.timezone === 'UTC';

/** That condition in SQL, on `budgets` as `t` (the unique index's predicate). */
export const ACCOUNT_BUDGET_SQL = (t: string) =>
  `${t}.scope_kind = 'account' AND ${t}.window_kind = 'month' AND ${t}.timezone = 'UTC'`;

export interface BudgetDef {
  id: string;
  accountId: string;
  account: string;
  scope: Scope;
  window: WindowKind;
  timezone: string;
  /** Normalised decimal text and units of 1e-8 USD. */
  amount: string;
  amountUnits: bigint;
  /** Ascending percentages. */
  levels: number[];
  /** As set (`block` stays `block` on a plan without the hard cap; see `enforced`). */
  action: BudgetAction;
  /** Admits (shadow: does not flag) a call only when its own worst case fits too (CONTRACT §6). */
  strict: boolean;
  /** false for a block budget whose account's plan has no hard cap: it only alerts. */
  enforced: boolean;
  /** The account's monthly budget (isAccountBudget). */
  accountBudget: boolean;
}

interface Row {
  id: string;
  account_id: string;
  account: string;
  plan_hard_cap: boolean;
  scope_kind: ScopeKind;
  scope_key: string | null;
  scope_value: string | null;
  window_kind: WindowKind;
  timezone: string;
  amount: string;
  levels: number[];
  action: BudgetAction;
  strict: boolean;
}

const SELECT = `SELECT d.id, d.account_id, a.name AS account, p.hard_cap AS plan_hard_cap, d.scope_kind, d.scope_key,
    d.scope_value, d.window_kind, d.timezone, d.amount::text AS amount, d.levels::int[] AS levels, d.action,
    d.strict
  FROM budgets d JOIN accounts a ON a.id = d.account_id JOIN plans p ON p.name = a.plan`;
const ORDER = `ORDER BY a.name, (${ACCOUNT_BUDGET_SQL('d')}) DESC, d.created_at, d.id`;

export function toDef(r: Row): BudgetDef {
  const amountUnits = toUnits(r.amount);
  const scope: Scope = { kind: r.scope_kind, key: r.scope_key, value: r.scope_value };
  return {
    id: r.id,
    accountId: r.account_id,
    account: r.account,
    scope,
    window: r.window_kind,
    timezone: r.timezone,
    amount: formatUnits(amountUnits),
    amountUnits,
    levels: [...r.levels].sort((a, b) => a - b),
    action: r.action,
    strict: r.strict,
    enforced: r.action !== 'block' || r.plan_hard_cap,
    accountBudget: isAccountBudget({ scope, window: r.window_kind, timezone: r.timezone }),
  };
}

/** Every budget of the fleet (the daemon's BudgetBook). */
export async function loadAllDefinitions(db: Queryable): Promise<BudgetDef[]> {
  return (await db.query<Row>(`${SELECT} ${ORDER}`)).map(toDef);
}

/** The budgets of one account, by name; undefined when the account does not exist. */
export async function loadAccountDefinitions(db: Queryable, account: string): Promise<BudgetDef[] | undefined> {
  const rows = await db.query<Row & { missing: boolean }>(
    `WITH acct AS (SELECT id FROM accounts WHERE name = $1)
     ${SELECT} WHERE d.account_id = (SELECT id FROM acct) ${ORDER}`,
    [account],
  );
  if (rows.length) return rows.map(toDef);
  const [exists] = await db.query(`SELECT 1 FROM accounts WHERE name = $1`, [account]);
  return exists ? [] : undefined;
}

/** The budgets of one account, by id (analytics). */
export async function loadAccountIdDefinitions(db: Queryable, accountId: string): Promise<BudgetDef[]> {
  return (await db.query<Row>(`${SELECT} WHERE d.account_id = $1::uuid ${ORDER}`, [accountId])).map(toDef);
}

/** One budget by id; undefined when there is none. */
export async function loadDefinition(db: Queryable, id: string): Promise<BudgetDef | undefined> {
  const [row] = await db.query<Row>(`${SELECT} WHERE d.id = $1 ${ORDER}`, [id]);
  return row && toDef(row);
}

/** An account's id and its account budget (isAccountBudget), by name; undefined when the
 *  account does not exist. */
export async function loadAccountBudget(
  db: Queryable,
  account: string,
): Promise<{ accountId: string; def: BudgetDef | undefined } | undefined> {
  const [row] = await db.query<{ account_id: string; budget_id: string | null }>(
    `SELECT a.id AS account_id, (SELECT b.id FROM budgets b WHERE b.account_id = a.id AND ${ACCOUNT_BUDGET_SQL('b')}) AS budget_id
       FROM accounts a WHERE a.name = $1`,
    [account],
  );
  if (!row) return undefined;
  return {
    accountId: row.account_id,
    def: row.budget_id === null ? undefined : await loadDefinition(db, row.budget_id),
  };
}
