/**
 * Budget definitions as the daemon and the CLI read them: every row of budget_definitions
 * (sql/130: the account budget and the scoped ones), with the account's name and whether its
 * plan enforces `block` (the hard cap is Pro only; a downgrade leaves a block budget alerting).
 */
import type { WindowKind } from '../calendar.js';
import { formatUnits, toUnits } from '../money.js';
import type { Queryable } from '../store/types.js';
import type { BudgetAction, Scope, ScopeKind } from './scope.js';

/** The account budget's id in budget_definitions (sql/130): 'acct_' + 12 hex digits of the account id. */
export const accountBudgetId = (accountId: string): string => `acct_${accountId.replace(/-/g, '').slice(0, 12)}`;

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
  /** The account's monthly budget (`meter budget set`): its levels fire in alert_levels_fired. */
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
  account_budget: boolean;
}

const SELECT = `SELECT d.id, d.account_id, a.name AS account, p.hard_cap AS plan_hard_cap, d.scope_kind, d.scope_key,
    d.scope_value, d.window_kind, d.timezone, d.amount::text AS amount, d.levels::int[] AS levels, d.action,
    d.strict, d.account_budget
  FROM budget_definitions d JOIN accounts a ON a.id = d.account_id JOIN plans p ON p.name = a.plan`;
const ORDER = `ORDER BY a.name, d.account_budget DESC, d.created_at, d.id`;

export function toDef(r: Row): BudgetDef {
  const amountUnits = toUnits(r.amount);
  return {
    id: r.id,
    accountId: r.account_id,
    account: r.account,
    scope: { kind: r.scope_kind, key: r.scope_key, value: r.scope_value },
    window: r.window_kind,
    timezone: r.timezone,
    amount: formatUnits(amountUnits),
    amountUnits,
    levels: [...r.levels].sort((a, b) => a - b),
    action: r.action,
    strict: r.strict,
    enforced: r.action !== 'block' || r.plan_hard_cap,
    accountBudget: r.account_budget,
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
