import type { Db, Queryable } from '../store/types.js';
import { AdminError, isoTime, requireAccount, unknownAccount } from './accounts.js';
import { generateServiceKey, hashSecret, parseServiceKey } from './key-format.js';

export type KeyStatus = 'active' | 'rotating' | 'expired' | 'revoked';

/** A key as listed: never its secret nor its hash. */
export interface KeyInfo {
  id: string;
  account: string;
  name: string | null;
  status: KeyStatus;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
}

/** A new key: the only time the full key is seen. */
export interface CreatedKey {
  id: string;
  key: string;
  account: string;
  name: string | null;
  created_at: string;
}

const MAX_LABEL = 128;
/** Counts as one of the account's keys while it still works (a rotated key in its grace too). */
const WORKS = `k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())`;

/** A store with its own connections to a database server (not the embedded one). */
function isServer(db: Queryable): db is Db {
  const kind = (db as Partial<Db>).kind;
  return (kind === 'postgres' || kind === 'timescale') && typeof (db as Partial<Db>).transaction === 'function';
}

export async function createKey(db: Queryable, account: string, name?: string): Promise<CreatedKey> {
  if (name !== undefined && (name.length === 0 || name.length > MAX_LABEL)) {
    throw new AdminError(`invalid key name: 1-${MAX_LABEL} characters`);
  }
  const { id, secret, key } = generateServiceKey();
  // The plan's key limit is part of the INSERT's WHERE clause, so an account at its limit
  // inserts nothing. On PostgreSQL two concurrent creations would both count the keys of the
  // same snapshot, so each first locks the account row: the second counts after the first
  // committed (a new statement, a new snapshot). The embedded store runs one statement at a
  // time (it may be reached through a daemon's admin API, where a transaction cannot span calls).
  const insert = (q: Queryable) =>
    q.query<{ id: string; name: string | null; created_at: unknown }>(
      `INSERT INTO api_keys (id, account_id, name, secret_hash)
     SELECT $1, a.id, $3, decode($4, 'hex')
     FROM accounts a JOIN plans p ON p.name = a.plan
     WHERE a.name = $2
       AND (SELECT count(*) FROM api_keys k WHERE k.account_id = a.id AND ${WORKS}) < p.max_active_keys
     RETURNING id, name, created_at`,
      [id, account, name ?? null, hashSecret(secret).toString('hex')],
    );
  const rows = isServer(db)
    ? await db.transaction(async (tx) => {
        await tx.query('SELECT 1 FROM accounts WHERE name = $1 FOR NO KEY UPDATE', [account]);
        return insert(tx);
      })
    : await insert(db);
  const row = rows[0];
  if (row) return { id: row.id, key, account, name: row.name, created_at: isoTime(row.created_at) };
  const [limit] = await db.query<{ plan: string; max_active_keys: number }>(
    `SELECT p.name AS plan, p.max_active_keys FROM accounts a JOIN plans p ON p.name = a.plan WHERE a.name = $1`,
    [account],
  );
  if (!limit) throw unknownAccount(account);
  throw new AdminError(
    `account ${JSON.stringify(account)} already has ${limit.max_active_keys} active keys, the limit of the ${limit.plan} plan: ` +
      `revoke one (meter keys revoke <id>) or change the plan (meter accounts set-plan ${account} <plan>)`,
  );
}

export async function listKeys(db: Queryable, account?: string): Promise<KeyInfo[]> {
  const rows = await db.query<{
    id: string;
    account: string;
    name: string | null;
    status: KeyStatus;
    created_at: unknown;
    expires_at: unknown;
    revoked_at: unknown;
  }>(
    `SELECT k.id, a.name AS account, k.name, k.created_at, k.expires_at, k.revoked_at,
            CASE WHEN k.revoked_at IS NOT NULL THEN 'revoked'
                 WHEN k.expires_at IS NOT NULL AND k.expires_at <= now() THEN 'expired'
                 WHEN k.expires_at IS NOT NULL THEN 'rotating'
                 ELSE 'active' END AS status
     FROM api_keys k JOIN accounts a ON a.id = k.account_id
     WHERE $1::text IS NULL OR a.name = $1
     ORDER BY a.name, k.created_at, k.id`,
    [account ?? null],
  );
  if (rows.length === 0 && account !== undefined) await requireAccount(db, account);
  return rows.map((r) => ({
    id: r.id,
    account: r.account,
    name: r.name,
    status: r.status,
    created_at: isoTime(r.created_at),
    expires_at: r.expires_at === null ? null : isoTime(r.expires_at),
    revoked_at: r.revoked_at === null ? null : isoTime(r.revoked_at),
  }));
}

/** A key's id, also from the full `mk_<id>_<secret>` (someone revoking a leaked key has that). */
export function keyIdOf(idOrKey: string): string {
  return parseServiceKey(idOrKey.trim())?.id ?? idOrKey;
}

/** What an error may show of a key argument: never a secret (CONTRACT §3), so anything
 *  key-shaped is cut after its public id. */
function shownKey(idOrKey: string): string {
  const m = /^(mk_[0-9a-f]{0,12})_?./.exec(idOrKey.trim());
  return m ? `${m[1]}_…` : idOrKey.length > 64 ? `${idOrKey.slice(0, 64)}…` : idOrKey;
}

function unknownKey(id: string): AdminError {
  return new AdminError(`unknown key ${JSON.stringify(shownKey(id))} (see \`meter keys list\`)`);
}

/** Revokes at once (every sidecar drops it at its next refresh). Revoking twice is a no-op. */
export async function revokeKey(db: Queryable, idOrKey: string): Promise<{ id: string; revoked_at: string }> {
  const id = keyIdOf(idOrKey);
  const rows = await db.query<{ id: string; revoked_at: unknown }>(
    `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()), updated_at = now()
     WHERE id = $1 RETURNING id, revoked_at`,
    [id],
  );
  if (!rows[0]) throw unknownKey(idOrKey);
  return { id: rows[0].id, revoked_at: isoTime(rows[0].revoked_at) };
}

export interface RotatedKey extends CreatedKey {
  /** The old key's id and when it stops working. */
  replaces: string;
  old_expires_at: string;
}

/** A new key for the same account and name; the old one keeps working for `graceSeconds`
 *  (never longer than it already would). Not subject to the plan's key limit: it replaces. */
export async function rotateKey(db: Queryable, oldIdOrKey: string, graceSeconds: number): Promise<RotatedKey> {
  const oldId = keyIdOf(oldIdOrKey);
  const { id, secret, key } = generateServiceKey();
  // One statement: the insert and the old key's end either both happen or neither.
  const rows = await db.query<{
    id: string;
    name: string | null;
    created_at: unknown;
    account: string;
    old_expires_at: unknown;
  }>(
    `WITH old AS (
       SELECT k.id, k.account_id, k.name FROM api_keys k WHERE k.id = $1 AND ${WORKS} FOR UPDATE
     ), fresh AS (
       INSERT INTO api_keys (id, account_id, name, secret_hash)
       SELECT $2, old.account_id, old.name, decode($3, 'hex') FROM old
       RETURNING id, account_id, name, created_at
     ), ended AS (
       UPDATE api_keys k
       SET expires_at = LEAST(COALESCE(k.expires_at, 'infinity'), now() + $4::integer * interval '1 second'),
           rotated_to = fresh.id, updated_at = now()
       FROM fresh WHERE k.id = $1
       RETURNING k.expires_at
     )
     SELECT fresh.id, fresh.name, fresh.created_at, a.name AS account, ended.expires_at AS old_expires_at
     FROM fresh JOIN accounts a ON a.id = fresh.account_id CROSS JOIN ended`,
    [oldId, id, hashSecret(secret).toString('hex'), graceSeconds],
  );
  const row = rows[0];
  if (row) {
    return {
      id: row.id,
      key,
      account: row.account,
      name: row.name,
      created_at: isoTime(row.created_at),
      replaces: oldId,
      old_expires_at: isoTime(row.old_expires_at),
    };
  }
  const [old] = await db.query('SELECT 1 FROM api_keys WHERE id = $1', [oldId]);
  if (!old) throw unknownKey(oldIdOrKey);
  throw new AdminError(
    `key ${JSON.stringify(oldId)} is revoked or expired: create a new one (meter keys create --account <name>)`,
  );
}
