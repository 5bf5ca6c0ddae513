import { AdminError } from '../auth/accounts.js';
import type { Queryable } from '../store/types.js';

/** A figure to set: a number, `plan` (back to the plan's figure), or undefined (unchanged). */
export type LimitEdit = number | 'plan' | undefined;

export interface LimitRow {
  /** null: the account's own limits (all its keys together). */
  key_id: string | null;
  calls_per_minute: number | null;
  tokens_per_minute: number | null;
}

export interface AccountLimits {
  account: string;
  plan: string;
  /** The plan's figures: per key, and per account (null: no such limit). */
  plan_limits: {
    key_calls_per_minute: number;
    key_tokens_per_minute: number | null;
    account_calls_per_minute: number | null;
    account_tokens_per_minute: number | null;
    monthly_calls: number | null;
  };
  overrides: LimitRow[];
}

/**
 * Sets an account's own per-minute limits (`keyId` undefined) or one of its keys', in place of
 * the plan's; `plan` puts one back. Every sidecar applies it within METER_KEY_REFRESH_MS (the
 * change counter moves in the same transaction).
 */
export async function setLimits(
  db: Queryable,
  account: string,
  keyId: string | undefined,
  edits: { callsPerMinute: LimitEdit; tokensPerMinute: LimitEdit },
): Promise<AccountLimits> {
  const [acct] = await db.query<{ id: string }>('SELECT id FROM accounts WHERE name = $1', [account]);
  if (!acct) throw new AdminError(`no account named "${account}" (meter accounts list shows them)`);
  if (keyId !== undefined) {
    const [key] = await db.query('SELECT 1 FROM api_keys WHERE id = $1 AND account_id = $2', [keyId, acct.id]);
    if (!key) throw new AdminError(`account ${account} has no key ${keyId} (meter keys list --account ${account})`);
  }
  const value = (e: LimitEdit) => (e === 'plan' ? null : (e ?? null));
  // A column not given keeps its value; `plan` clears it; a row left with nothing is deleted.
  const params = [acct.id, keyId ?? ''];
  await db.query(
    `INSERT INTO limit_overrides AS o (account_id, key_id, calls_per_minute, tokens_per_minute)
     VALUES ($1, $2, $3, $4)
     ON CONFLICT (account_id, key_id) DO UPDATE SET
       calls_per_minute = CASE WHEN $5 THEN EXCLUDED.calls_per_minute ELSE o.calls_per_minute END,
       tokens_per_minute = CASE WHEN $6 THEN EXCLUDED.tokens_per_minute ELSE o.tokens_per_minute END,
       updated_at = now()`,
    [
      ...params,
      value(edits.callsPerMinute),
      value(edits.tokensPerMinute),
      edits.callsPerMinute !== undefined,
      edits.tokensPerMinute !== undefined,
    ],
  );
  await db.query(
    `DELETE FROM limit_overrides WHERE account_id = $1 AND key_id = $2
        AND calls_per_minute IS NULL AND tokens_per_minute IS NULL`,
    params,
  );
  return showLimits(db, account);
}

export async function showLimits(db: Queryable, account: string): Promise<AccountLimits> {
  const [row] = await db.query<{
    id: string;
    plan: string;
    rate_limit_per_minute: number;
    tokens_per_minute: number | null;
    account_calls_per_minute: number | null;
    account_tokens_per_minute: number | null;
    monthly_call_quota: number | null;
  }>(
    `SELECT a.id, a.plan, p.rate_limit_per_minute, p.tokens_per_minute, p.account_calls_per_minute,
            p.account_tokens_per_minute, p.monthly_call_quota
       FROM accounts a JOIN plans p ON p.name = a.plan WHERE a.name = $1`,
    [account],
  );
  if (!row) throw new AdminError(`no account named "${account}" (meter accounts list shows them)`);
  const overrides = await db.query<LimitRow>(
    `SELECT NULLIF(key_id, '') AS key_id, calls_per_minute, tokens_per_minute FROM limit_overrides
      WHERE account_id = $1 ORDER BY limit_overrides.key_id`,
    [row.id],
  );
  return {
    account,
    plan: row.plan,
    plan_limits: {
      key_calls_per_minute: row.rate_limit_per_minute,
      key_tokens_per_minute: row.tokens_per_minute,
      account_calls_per_minute: row.account_calls_per_minute,
      account_tokens_per_minute: row.account_tokens_per_minute,
      monthly_calls: row.monthly_call_quota,
    },
    overrides,
  };
}
