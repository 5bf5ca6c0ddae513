import type { Queryable } from '../store/types.js';
import { MeterError } from '../errors.js';

/** A user error in account or key administration: the CLI prints its message as is. */
export class AdminError extends MeterError {
  override name = 'AdminError';
}

export interface Account {
  name: string;
  plan: string;
  created_at: string;
  active_keys: number;
}

/** The same rule as the accounts.name CHECK constraint, checked first for a clear message. */
const ACCOUNT_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** Timestamps arrive as Date (pg, PGlite) or ISO strings (the daemon's admin API). */
export function isoTime(value: unknown): string {
  return (value instanceof Date ? value : new Date(String(value))).toISOString();
}

export async function planNames(db: Queryable): Promise<string[]> {
  const rows = await db.query<{ name: string }>('SELECT name FROM plans ORDER BY name');
  return rows.map((r) => r.name);
}

async function unknownPlan(db: Queryable, plan: string): Promise<AdminError> {
  return new AdminError(`unknown plan ${JSON.stringify(plan)}: expected one of ${(await planNames(db)).join(', ')}`);
}

export function unknownAccount(name: string): AdminError {
  return new AdminError(`unknown account ${JSON.stringify(name)} (see \`meter accounts list\`)`);
}

/** For a listing that came back empty: an account of that name exists, or the unknown-account error. */
export async function requireAccount(db: Queryable, name: string): Promise<void> {
  const known = await db.query('SELECT 1 FROM accounts WHERE name = $1', [name]);
  if (known.length === 0) throw unknownAccount(name);
}

/** Why `name` cannot be an account's name, or undefined when it can. */
export function accountNameProblem(name: string): string | undefined {
  return ACCOUNT_NAME.test(name)
    ? undefined
    : `invalid account name ${JSON.stringify(name)}: 1-64 characters A-Z a-z 0-9 _ . -, starting with a letter or digit`;
}

export async function createAccount(db: Queryable, name: string, plan = 'free'): Promise<Account> {
  const problem = accountNameProblem(name);
  if (problem) throw new AdminError(problem);
  // One statement (it may run through a daemon's admin API): an unknown plan or a taken name
  // inserts nothing, and a second look says which.
  const rows = await db.query<{ name: string; plan: string; created_at: unknown }>(
    `INSERT INTO accounts (name, plan) SELECT $1, p.name FROM plans p WHERE p.name = $2
     ON CONFLICT (name) DO NOTHING RETURNING name, plan, created_at`,
    [name, plan],
  );
  const row = rows[0];
  if (row) return { name: row.name, plan: row.plan, created_at: isoTime(row.created_at), active_keys: 0 };
  if (!(await planNames(db)).includes(plan)) throw await unknownPlan(db, plan);
  throw new AdminError(`account ${JSON.stringify(name)} already exists`);
}

export async function listAccounts(db: Queryable): Promise<Account[]> {
  const rows = await db.query<{ name: string; plan: string; created_at: unknown; active_keys: string | number }>(
    `SELECT a.name, a.plan, a.created_at,
            count(k.id) FILTER (WHERE k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())) AS active_keys
     FROM accounts a LEFT JOIN api_keys k ON k.account_id = a.id
     GROUP BY a.id ORDER BY a.name`,
  );
  return rows.map((r) => ({
    name: r.name,
    plan: r.plan,
    created_at: isoTime(r.created_at),
    active_keys: Number(r.active_keys),
  }));
}

export async function setAccountPlan(
  db: Queryable,
  name: string,
  plan: string,
): Promise<{ name: string; plan: string; previous: string }> {
  const rows = await db.query<{ name: string; plan: string; previous: string }>(
    `UPDATE accounts a SET plan = p.name, updated_at = now()
     FROM plans p, (SELECT id, plan FROM accounts WHERE name = $1) old
     WHERE a.id = old.id AND p.name = $2
     RETURNING a.name, a.plan, old.plan AS previous`,
    [name, plan],
  );
  if (rows[0]) return rows[0];
  if (!(await planNames(db)).includes(plan)) throw await unknownPlan(db, plan);
  throw unknownAccount(name);
}

export interface DeletedAccount {
  name: string;
  /** Its keys, all deleted with it (live ones only with --force). */
  keys: number;
  /** Usage events it leaves: kept, under no account (docs/security.md). */
  events: number;
}

/**
 * Deletes an account with its keys, budgets and alert channels (ONE statement, so it may run
 * through a daemon's admin API). Refused while it has live keys unless `force`. Its usage
 * events and rollups are kept: they are what the provider billed (reconciliation compares
 * them with the organisation's totals), and they belong to no account any more. Its keys stop
 * working on every sidecar within one key refresh (the deletions table, sql/080).
 */
export async function deleteAccount(db: Queryable, name: string, force: boolean): Promise<DeletedAccount> {
  const rows = await db.query<{ found: number; live: number; keys: number; deleted: number; events: string }>(
    `WITH a AS (SELECT id FROM accounts WHERE name = $1),
          live AS (SELECT count(*)::int AS n FROM api_keys k JOIN a ON k.account_id = a.id
                    WHERE k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())),
          go AS (SELECT id FROM a WHERE $2::boolean OR (SELECT n FROM live) = 0),
          keys AS (DELETE FROM api_keys k USING go WHERE k.account_id = go.id RETURNING k.id),
          gone AS (DELETE FROM accounts WHERE id IN (SELECT id FROM go) RETURNING id)
     SELECT (SELECT count(*) FROM a)::int AS found, (SELECT n FROM live) AS live,
            (SELECT count(*) FROM keys)::int AS keys, (SELECT count(*) FROM gone)::int AS deleted,
            (SELECT coalesce(sum(requests), 0) FROM usage_daily WHERE account_id IN (SELECT id FROM go))::text AS events`,
    [name, force],
  );
  const r = rows[0]!;
  if (Number(r.found) === 0) throw unknownAccount(name);
  if (Number(r.deleted) === 0) {
    throw new AdminError(
      `account ${JSON.stringify(name)} has ${r.live} live key${Number(r.live) === 1 ? '' : 's'}: revoke ${Number(r.live) === 1 ? 'it' : 'them'} first (meter keys revoke <id>), or pass --force to delete the account and its keys together`,
    );
  }
  return { name, keys: Number(r.keys), events: Number(r.events) };
}
