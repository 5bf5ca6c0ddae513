/**
 * What `meter budgets create|list|show|update|delete` does to the store. Each write is one
 * statement (the CLI may run through a daemon's admin API, which has no transactions). The
 * account budget (scope account, window month, zone UTC: `meter budget set`'s) is one of them;
 * an account has at most one, so a second is refused, naming the first.
 */
import { randomBytes } from 'node:crypto';
import type { WindowKind } from '../calendar.js';
import { getProvider, PROVIDER_SLUGS } from '../providers/index.js';
import type { Queryable } from '../store/types.js';
import { BudgetAdminError } from './admin.js';
import { unknownAccount } from '../auth/accounts.js';
import {
  ACCOUNT_BUDGET_SQL,
  isAccountBudget,
  loadAccountBudget,
  loadAccountDefinitions,
  loadAllDefinitions,
  loadDefinition,
} from './definitions.js';
import { DEFAULT_LEVELS, type BudgetAction, type Scope } from './scope.js';
import { budgetStatus, budgetStatuses, budgetView, currentWindow, readSpend, type BudgetView } from './status.js';

export interface BudgetSpec {
  amount: string;
  scope: Scope;
  window: WindowKind;
  timezone: string;
  levels: number[];
  action: BudgetAction;
  /** Block and shadow budgets: a call's own worst case must fit too (CONTRACT §6). */
  strict: boolean;
}

const unknownBudget = (id: string) => new BudgetAdminError(`unknown budget "${id}" (see \`meter budgets list\`)`);

const blockRefused = (account: string, plan: string) =>
  new BudgetAdminError(
    `--action block is not available on the ${plan} plan of account "${account}": it needs a plan with a hard cap ` +
      `(e.g. \`meter accounts set-plan ${account} pro\`), or use --action alert or shadow`,
  );

/** The account already has an account budget (sql/170's unique index): `meter budget set` and
 *  `budgets update` change it. */
const secondAccountBudget = (account: string, id: string) =>
  new BudgetAdminError(
    `account "${account}" already has its monthly budget ${id} (scope account, window month, zone UTC): ` +
      `change it with \`meter budgets update ${id}\` or \`meter budget set --account ${account}\`, ` +
      'or give this budget another scope, window or zone',
  );

/** The account budget of `account` other than `self`, when `isOne` (the budget being written
 *  would be one too): a statement that finds it writes nothing. */
const OTHER_ACCOUNT_BUDGET = (account: string, isOne: string, self: string) =>
  `(SELECT o.id FROM budgets o WHERE o.account_id = ${account} AND ${ACCOUNT_BUDGET_SQL('o')} AND ${isOne}
      AND o.id IS DISTINCT FROM ${self})`;

function checkScope(scope: Scope): void {
  if (scope.kind === 'provider' && !getProvider(scope.value!)) {
    throw new BudgetAdminError(
      `--scope provider:${scope.value} names no provider: expected one of ${PROVIDER_SLUGS.join(', ')}`,
    );
  }
}

export async function createBudget(
  db: Queryable,
  account: string,
  spec: Partial<BudgetSpec> & { amount: string },
  now = Date.now(),
): Promise<BudgetView> {
  const s: BudgetSpec = {
    amount: spec.amount,
    scope: spec.scope ?? { kind: 'account', key: null, value: null },
    window: spec.window ?? 'month',
    timezone: spec.timezone ?? 'UTC',
    levels: spec.levels ?? DEFAULT_LEVELS,
    action: spec.action ?? 'alert',
    strict: spec.strict ?? false,
  };
  checkScope(s.scope);
  const id = randomBytes(6).toString('hex');
  const [row] = await db.query<{
    plan: string;
    plan_hard_cap: boolean;
    key_ok: boolean;
    other: string | null;
    saved: number;
  }>(
    `WITH acct AS (
       SELECT a.id, a.plan, p.hard_cap AS plan_hard_cap FROM accounts a JOIN plans p ON p.name = a.plan WHERE a.name = $1
     ), key_ok AS (
       SELECT $4::text <> 'key' OR EXISTS (SELECT 1 FROM api_keys k, acct WHERE k.id = $6 AND k.account_id = acct.id) AS ok
     ), other AS (
       SELECT ${OTHER_ACCOUNT_BUDGET('(SELECT id FROM acct)', "$4 = 'account' AND $7 = 'month' AND $8 = 'UTC'", 'NULL')} AS id
     ), saved AS (
       INSERT INTO budgets (id, account_id, scope_kind, scope_key, scope_value, window_kind, timezone, amount, levels, action, strict)
       SELECT $2, acct.id, $4, $5, $6, $7, $8, $3::numeric, $9::smallint[], $10, $11
         FROM acct, key_ok, other WHERE key_ok.ok AND ($10 <> 'block' OR acct.plan_hard_cap) AND other.id IS NULL
       ON CONFLICT DO NOTHING
       RETURNING id
     )
     SELECT plan, plan_hard_cap, (SELECT ok FROM key_ok) AS key_ok, (SELECT id FROM other) AS other,
            (SELECT count(*) FROM saved)::int AS saved FROM acct`,
    [
      account,
      id,
      s.amount,
      s.scope.kind,
      s.scope.key,
      s.scope.value,
      s.window,
      s.timezone,
      s.levels,
      s.action,
      s.strict,
    ],
  );
  if (!row) throw unknownAccount(account);
  if (!row.key_ok) {
    throw new BudgetAdminError(
      `--scope key:${s.scope.value} is not a key of account "${account}" (see \`meter keys list --account ${account}\`)`,
    );
  }
  if (s.action === 'block' && !row.plan_hard_cap) throw blockRefused(account, row.plan);
  if (row.saved === 0) {
    const other = row.other ?? (await loadAccountBudget(db, account))?.def?.id;
    throw secondAccountBudget(account, other ?? '?');
  }
  return budgetView(await budgetStatus(db, (await loadDefinition(db, id))!, now));
}

/** Every budget of one account, or of every account. */
export async function listBudgets(db: Queryable, account?: string, now = Date.now()): Promise<BudgetView[]> {
  const defs = account === undefined ? await loadAllDefinitions(db) : await loadAccountDefinitions(db, account);
  if (!defs) throw unknownAccount(account!);
  return (await budgetStatuses(db, defs, now)).map(budgetView);
}

export async function showBudgetById(db: Queryable, id: string, now = Date.now()): Promise<BudgetView> {
  const def = await loadDefinition(db, id);
  if (!def) throw unknownBudget(id);
  return budgetView(await budgetStatus(db, def, now));
}

/**
 * Changes only what is given. Levels fired in the current window that the new definition has
 * not reached are re-armed (a raised amount alerts again at 80% of the new amount).
 */
export async function updateBudget(
  db: Queryable,
  id: string,
  changes: Partial<BudgetSpec>,
  now = Date.now(),
): Promise<BudgetView> {
  const def = await loadDefinition(db, id);
  if (!def) throw unknownBudget(id);
  if (changes.scope) checkScope(changes.scope);
  const scope = changes.scope;
  const next = {
    scope: scope ?? def.scope,
    window: changes.window ?? def.window,
    timezone: changes.timezone ?? def.timezone,
  };
  const [row] = await db.query<{ plan: string; hard_cap: boolean; other: string | null; saved: number }>(
    `WITH cur AS (
       SELECT s.id, s.account_id, a.name, a.plan, p.hard_cap FROM budgets s JOIN accounts a ON a.id = s.account_id
         JOIN plans p ON p.name = a.plan WHERE s.id = $1
     ), other AS (
       SELECT ${OTHER_ACCOUNT_BUDGET('(SELECT account_id FROM cur)', '$11::boolean', '$1')} AS id
     ), saved AS (
       UPDATE budgets s SET amount = coalesce($2::numeric, s.amount),
           scope_kind = coalesce($3, s.scope_kind),
           scope_key = CASE WHEN $3::text IS NULL THEN s.scope_key ELSE $4 END,
           scope_value = CASE WHEN $3::text IS NULL THEN s.scope_value ELSE $5 END,
           window_kind = coalesce($6, s.window_kind), timezone = coalesce($7, s.timezone),
           levels = coalesce($8::smallint[], s.levels), action = coalesce($9, s.action),
           strict = coalesce($10::boolean, s.strict), updated_at = now()
         FROM cur, other WHERE s.id = cur.id AND (coalesce($9, s.action) <> 'block' OR cur.hard_cap) AND other.id IS NULL
           AND ($3::text IS DISTINCT FROM 'key' OR EXISTS (SELECT 1 FROM api_keys k WHERE k.id = $5 AND k.account_id = s.account_id))
       RETURNING s.id
     )
     SELECT plan, hard_cap, (SELECT id FROM other) AS other, (SELECT count(*) FROM saved)::int AS saved FROM cur`,
    [
      id,
      changes.amount ?? null,
      scope?.kind ?? null,
      scope?.key ?? null,
      scope?.value ?? null,
      changes.window ?? null,
      changes.timezone ?? null,
      changes.levels ?? null,
      changes.action ?? null,
      changes.strict ?? null,
      isAccountBudget(next),
    ],
  );
  if (!row) throw unknownBudget(id);
  if (row.saved === 0) {
    if ((changes.action ?? def.action) === 'block' && !row.hard_cap) throw blockRefused(def.account, row.plan);
    if (row.other !== null) throw secondAccountBudget(def.account, row.other);
    throw new BudgetAdminError(
      `--scope key:${scope?.value} is not a key of account "${def.account}" (see \`meter keys list --account ${def.account}\`)`,
    );
  }
  const saved = (await loadDefinition(db, id))!;
  const w = currentWindow(saved, now);
  const spend = await readSpend(db, saved, w);
  await db.query(
    `DELETE FROM budget_levels_fired WHERE budget_id = $1 AND window_start = $2::timestamptz
        AND level * $3::numeric > $4::numeric * 100`,
    [id, new Date(w.start).toISOString(), saved.amount, spend],
  );
  return budgetView(await budgetStatus(db, saved, now));
}

/** Deletes a budget (the account budget too: `budget clear`); its fired levels go with it. */
export async function deleteBudget(db: Queryable, id: string): Promise<{ id: string; deleted: boolean }> {
  const [row] = await db.query<{ n: number }>(
    `WITH gone AS (DELETE FROM budgets WHERE id = $1 RETURNING 1) SELECT count(*)::int AS n FROM gone`,
    [id],
  );
  if (!row || row.n === 0) throw unknownBudget(id);
  return { id, deleted: true };
}
