import { describe, expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import type { Daemon } from '../../src/server/daemon.js';
import { tempDirAtFileEnd } from '../helpers/cleanup.js';
import { runCli } from '../helpers/cli.js';
import { answerChat, eventually, startFullDaemon } from '../helpers/fleet.js';
import { createTestDatabase } from '../helpers/stores.js';
import { startFakeUpstream } from '../helpers/upstreams.js';

/**
 * A deleted account or key stops working on every sidecar within the revocation bound (5 s,
 * CONTRACT §1), whether it was deleted by `meter accounts delete` or by plain SQL: the key
 * cache re-reads changed rows, and a deleted row never shows as changed.
 */

const BOUND_MS = 5_000;

async function call(daemon: Daemon, key: string): Promise<number> {
  const res = await fetch(`${daemon.url}/proxy/openai/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: '{"model":"gpt-4o","messages":[]}',
  });
  await res.text();
  return res.status;
}

const refusedWithin = (daemon: Daemon, key: string) =>
  eventually(async () => (await call(daemon, key)) === 401, BOUND_MS, 'the deleted key refused');

async function setup(databaseUrl: string | undefined) {
  const upstream = await startFakeUpstream();
  answerChat(upstream, { prompt: 10, completion: 5 });
  const dataDir = tempDirAtFileEnd();
  const daemon = await startFullDaemon(databaseUrl, upstream, { METER_DATA_DIR: dataDir, METER_KEY_REFRESH_MS: '500' });
  const env = databaseUrl ? { DATABASE_URL: databaseUrl } : { DATABASE_URL: '', METER_DATA_DIR: dataDir };
  return { daemon, env };
}

describe('deleting accounts and keys', () => {
  it('by SQL: a deleted key, then a deleted account, stop working within the bound', { timeout: 60_000 }, async () => {
    const { daemon } = await setup(await createTestDatabase());
    await createAccount(daemon.store, 'gone', 'pro');
    const first = await createKey(daemon.store, 'gone', 'a');
    const second = await createKey(daemon.store, 'gone', 'b');
    expect(await call(daemon, first.key)).toBe(200);
    expect(await call(daemon, second.key)).toBe(200);

    await daemon.store.query('DELETE FROM api_keys WHERE id = $1', [first.id]);
    await refusedWithin(daemon, first.key);
    expect(await call(daemon, second.key)).toBe(200);

    await daemon.store.query(
      `DELETE FROM api_keys WHERE account_id = (SELECT id FROM accounts WHERE name = 'gone');
       DELETE FROM accounts WHERE name = 'gone'`,
    );
    await refusedWithin(daemon, second.key);
  });

  it(
    'meter accounts delete (PostgreSQL): refused while keys are live, --force deletes; the keys stop working within the bound',
    { timeout: 60_000 },
    async () => {
      const { daemon, env } = await setup(await createTestDatabase());
      await createAccount(daemon.store, 'acme', 'pro');
      const { key } = await createKey(daemon.store, 'acme', 'k');
      expect(await call(daemon, key)).toBe(200);

      const refused = await runCli(['accounts', 'delete', 'acme'], env);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/^meter: account "acme" has 1 live key: .*--force/);
      expect(await call(daemon, key)).toBe(200);

      const unknown = await runCli(['accounts', 'delete', 'nobody'], env);
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toMatch(/unknown account "nobody"/);

      await eventually(
        async () =>
          Number((await daemon.store.query<{ n: string }>('SELECT count(*) AS n FROM usage_events'))[0]!.n) >= 2,
        10_000,
        'events written',
      );
      const deleted = await runCli(['accounts', 'delete', 'acme', '--force', '--json'], env);
      expect(deleted.code, deleted.stderr).toBe(0);
      expect(JSON.parse(deleted.stdout)).toEqual({ name: 'acme', keys: 1, events: 2 });
      await refusedWithin(daemon, key);
      // Its events are kept (docs/security.md); a refused call writes none.
      const events = async () =>
        Number((await daemon.store.query<{ n: string }>('SELECT count(*) AS n FROM usage_events'))[0]!.n);
      await new Promise((r) => setTimeout(r, 500));
      const kept = await events();
      expect(kept).toBeGreaterThanOrEqual(2);
      expect(await call(daemon, key)).toBe(401);
      await new Promise((r) => setTimeout(r, 500));
      expect(await events()).toBe(kept);
    },
  );

  it(
    'meter accounts delete on the embedded store goes through the daemon that holds it',
    { timeout: 240_000 },
    async () => {
      const { daemon, env } = await setup(undefined);
      expect((await runCli(['accounts', 'create', 'solo', '--plan', 'pro'], env)).code).toBe(0);
      const key = JSON.parse((await runCli(['keys', 'create', '--account', 'solo', '--json'], env)).stdout).key;
      expect(await call(daemon, key)).toBe(200);
      const refused = await runCli(['accounts', 'delete', 'solo'], env);
      expect(refused.code).toBe(1);
      const deleted = await runCli(['accounts', 'delete', 'solo', '--force'], env);
      expect(deleted.code, deleted.stderr).toBe(0);
      expect(deleted.stdout).toMatch(/^deleted account solo and its 1 key .* kept, under no account/);
      await refusedWithin(daemon, key);
      expect((await runCli(['accounts', 'list', '--json'], env)).stdout).not.toContain('solo');
    },
  );
});
