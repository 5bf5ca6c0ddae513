/**
 * What `meter budgets create|list|show|update|delete` does to the store. Each write is one
 * statement (the CLI may run through a daemon's admin API, which has no transactions). The
 * account budget (id `acct_…`) is the one `meter budget set` keeps: update and delete reach it
 * through setBudget / clearBudget, so both commands see one budget.
 */
import { randomBytes } from 'node:crypto';
import type { WindowKind } from '../calendar.js';
import { getProvider, PROVIDER_SLUGS } from '../providers/index.js';
import type { Queryable } from '../store/types.js';
import { BudgetAdminError, clearBudget, setBudget } from './admin.js';
import { unknownAccount } from '../auth/accounts.js';
import { loadAccountDefinitions, loadAllDefinitions, loadDefinition, type BudgetDef } from './definitions.js';
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
  const [row] = await db.query<{ plan: string; plan_hard_cap: boolean; key_ok: boolean; saved: number }>(
    `WITH acct AS (
       SELECT a.id, a.plan, p.hard_cap AS plan_hard_cap FROM accounts a JOIN plans p ON p.name = a.plan WHERE a.name = $1
     ), key_ok AS (
       SELECT $4::text <> 'key' OR EXISTS (SELECT 1 FROM api_keys k, acct WHERE k.id = $6 AND k.account_id = acct.id) AS ok
     ), saved AS (
       INSERT INTO scoped_budgets (id, account_id, scope_kind, scope_key, scope_value, window_kind, timezone, amount, levels, action, strict)
       SELECT $2, acct.id, $4, $5, $6, $7, $8, $3::numeric, $9::smallint[], $10, $11
         FROM acct, key_ok WHERE key_ok.ok AND ($10 <> 'block' OR acct.plan_hard_cap)
       RETURNING id
     )
     SELECT plan, plan_hard_cap, (SELECT ok FROM key_ok) AS key_ok, (SELECT count(*) FROM saved)::int AS saved FROM acct`,
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
  if (row.saved === 0) throw blockRefused(account, row.plan);
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
  if (def.accountBudget) return updateAccountBudget(db, def, changes, now);
  if (changes.scope) checkScope(changes.scope);
  const scope = changes.scope;
  const [row] = await db.query<{ plan: string; hard_cap: boolean; saved: number }>(
    `WITH cur AS (
       SELECT s.id, a.name, a.plan, p.hard_cap FROM scoped_budgets s JOIN accounts a ON a.id = s.account_id
         JOIN plans p ON p.name = a.plan WHERE s.id = $1
     ), saved AS (
       UPDATE scoped_budgets s SET amount = coalesce($2::numeric, s.amount),
           scope_kind = coalesce($3, s.scope_kind),
           scope_key = CASE WHEN $3::text IS NULL THEN s.scope_key ELSE $4 END,
           scope_value = CASE WHEN $3::text IS NULL THEN s.scope_value ELSE $5 END,
           window_kind = coalesce($6, s.window_kind), timezone = coalesce($7, s.timezone),
           levels = coalesce($8::smallint[], s.levels), action = coalesce($9, s.action),
           strict = coalesce($10::boolean, s.strict), updated_at = now()
         FROM cur WHERE s.id = cur.id AND (coalesce($9, s.action) <> 'block' OR cur.hard_cap)
           AND ($3::text IS DISTINCT FROM 'key' OR EXISTS (SELECT 1 FROM api_keys k WHERE k.id = $5 AND k.account_id = s.account_id))
       RETURNING s.id
     )
     SELECT plan, hard_cap, (SELECT count(*) FROM saved)::int AS saved FROM cur`,
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
    ],
  );
  if (!row) throw unknownBudget(id);
  if (row.saved === 0) {
    if ((changes.action ?? def.action) === 'block' && !row.hard_cap) throw blockRefused(def.account, row.plan);
    throw new BudgetAdminError(
      `--scope key:${scope?.value} is not a key of account "${def.account}" (see \`meter keys list --account ${def.account}\`)`,
    );
  }
  const next = (await loadDefinition(db, id))!;
  const w = currentWindow(next, now);
  const spend = await readSpend(db, next, w);
  await db.query(
    `DELETE FROM budget_levels_fired WHERE budget_id = $1 AND window_start = $2::timestamptz
        AND level * $3::numeric > $4::numeric * 100`,
    [id, new Date(w.start).toISOString(), next.amount, spend],
  );
  return budgetView(await budgetStatus(db, next, now));
}

/** The account budget keeps its scope, window, zone and levels; its amount and action
 *  (alert or block: its hard cap) change as `meter budget set` changes them. */
async function updateAccountBudget(
  db: Queryable,
  def: BudgetDef,
  changes: Partial<BudgetSpec>,
  now: number,
): Promise<BudgetView> {
  const fixed =
    (changes.scope && changes.scope.kind !== 'account') ||
    (changes.window && changes.window !== 'month') ||
    (changes.timezone && changes.timezone !== 'UTC') ||
    (changes.levels && changes.levels.join() !== '50,80,100');
  if (fixed || changes.action === 'shadow') {
    throw new BudgetAdminError(
      `budget ${def.id} is the account's monthly budget (\`meter budget set\`): its scope (account), window (month), zone (UTC) ` +
        'and levels (50,80,100) are fixed and its action is alert or block; create another budget with `meter budgets create` for anything else',
    );
  }
  const hardCap = changes.action === undefined ? undefined : changes.action === 'block';
  await setBudget(db, def.account, changes.amount ?? def.amount, hardCap, new Date(now));
  return showBudgetById(db, def.id, now);
}

/** Deletes a budget (the account budget through clearBudget); its fired levels go with it. */
export async function deleteBudget(db: Queryable, id: string): Promise<{ id: string; deleted: boolean }> {
  const def = await loadDefinition(db, id);
  if (!def) throw unknownBudget(id);
  if (def.accountBudget) return { id, deleted: await clearBudget(db, def.account) };
  const [row] = await db.query<{ n: number }>(
    `WITH gone AS (DELETE FROM scoped_budgets WHERE id = $1 RETURNING 1) SELECT count(*)::int AS n FROM gone`,
    [id],
  );
  return { id, deleted: (row?.n ?? 0) > 0 };
}
