import pino from 'pino';
import { openEmbedded } from '../../../src/store/embedded.js';
import { migrate, openStore } from '../../../src/store/index.js';
import type { Db, Queryable } from '../../../src/store/types.js';
import { tempDir, type Backend } from '../../helpers/stores.js';

/** Test data, written straight into the tables (the writer and accounts CLI are not under test). */

export const silentLogger = pino({ level: 'silent' });

export async function createAccount(db: Queryable, name: string, plan: 'free' | 'pro' = 'pro'): Promise<string> {
  const [row] = await db.query<{ id: string }>('INSERT INTO accounts (name, plan) VALUES ($1, $2) RETURNING id', [
    name,
    plan,
  ]);
  return row!.id;
}

/** Adds spend to the usage_daily rollup (and usage_tag_daily for the given tags), as the
 *  writer would after metering calls. */
export async function seedSpend(
  db: Queryable,
  accountId: string,
  day: string,
  spend: string,
  opts: { provider?: string; model?: string; requests?: number; tags?: Record<string, string> } = {},
): Promise<void> {
  const requests = opts.requests ?? 1;
  await db.query(
    `INSERT INTO usage_daily (account_id, day, provider, model, spend, requests) VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (account_id, day, provider, model)
     DO UPDATE SET spend = usage_daily.spend + EXCLUDED.spend, requests = usage_daily.requests + EXCLUDED.requests`,
    [accountId, day, opts.provider ?? 'openai', opts.model ?? 'gpt-4o', spend, requests],
  );
  for (const [key, value] of Object.entries(opts.tags ?? {})) {
    await db.query(
      `INSERT INTO usage_tag_daily (account_id, day, tag_key, tag_value, spend, requests) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (account_id, day, tag_key, tag_value)
       DO UPDATE SET spend = usage_tag_daily.spend + EXCLUDED.spend, requests = usage_tag_daily.requests + EXCLUDED.requests`,
      [accountId, day, key, value, spend, requests],
    );
  }
}

/** The account budget (scope account, window month, zone UTC), as `meter budget set` writes it
 *  (a hard cap is action block); returns its id. */
export async function setBudgetRow(
  db: Queryable,
  accountId: string,
  monthlyUsd: string,
  hardCap = false,
): Promise<string> {
  const [row] = await db.query<{ id: string }>(
    `INSERT INTO budgets (id, account_id, scope_kind, window_kind, timezone, amount, action)
     VALUES (substr(md5(random()::text), 1, 12), $1, 'account', 'month', 'UTC', $2, $3)
     ON CONFLICT (account_id) WHERE scope_kind = 'account' AND window_kind = 'month' AND timezone = 'UTC'
       DO UPDATE SET amount = EXCLUDED.amount, action = EXCLUDED.action
     RETURNING id`,
    [accountId, monthlyUsd, hardCap ? 'block' : 'alert'],
  );
  return row!.id;
}

/** A webhook channel with a known secret. */
export async function addWebhook(
  db: Queryable,
  accountId: string,
  url: string,
  secret = 'test-secret-0123456789',
): Promise<string> {
  const id = Math.floor(Math.random() * 2 ** 48)
    .toString(16)
    .padStart(12, '0');
  await db.query(
    `INSERT INTO alert_channels (id, account_id, kind, target, secret) VALUES ($1, $2, 'webhook', $3, $4)`,
    [id, accountId, url, secret],
  );
  return id;
}

/** A fresh store of `backend` for a daemon test, open and migrated for setting it up: close
 *  `setup` before starting the daemon on `databaseUrl` (undefined: the embedded store in `dataDir`). */
export async function daemonStore(backend: Backend): Promise<{ setup: Db; databaseUrl?: string; dataDir: string }> {
  const { databaseUrl, dataDir } = await backend.config();
  const setup: Db = databaseUrl
    ? await openStore({ databaseUrl, dataDir: tempDir(), dbPoolMax: 1 })
    : await openEmbedded(dataDir);
  await migrate(setup);
  return { setup, databaseUrl, dataDir };
}
