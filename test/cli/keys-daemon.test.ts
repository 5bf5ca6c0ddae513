import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { proxyComponent } from '../../src/proxy/component.js';
import { startDaemon, type Daemon } from '../../src/server/daemon.js';
import { runCli } from '../helpers/cli.js';
import { tempDirAtFileEnd } from '../helpers/cleanup.js';
import { startFakeUpstream } from '../helpers/upstreams.js';

/** While a daemon holds the embedded store, `meter accounts|keys` go through its admin API
 *  (single statements, JSON rows): the same commands, the same results, and the daemon's proxy
 *  honours a new key at once and a revocation at its next refresh. */
describe('meter accounts and keys through a running daemon on the embedded store', () => {
  let daemon: Daemon;
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    const fake = await startFakeUpstream();
    const dataDir = tempDirAtFileEnd();
    env = { DATABASE_URL: '', METER_DATA_DIR: dataDir };
    const config = loadConfig({
      METER_PORT: '0',
      METER_DATA_DIR: dataDir,
      METER_KEY_REFRESH_MS: '200',
      METER_UPSTREAM_OPENAI: `${fake.origin}/v1`,
    });
    daemon = await startDaemon(config, pino({ level: 'silent' }), async (ctx, start) =>
      start(await proxyComponent(ctx)),
    );
  });
  afterAll(() => daemon?.close());

  const status = async (key: string) =>
    (await fetch(`${daemon.url}/proxy/openai/models`, { headers: { authorization: `Bearer ${key}` } })).status;

  it('create, use, rotate, revoke', { timeout: 120_000 }, async () => {
    expect((await runCli(['accounts', 'create', 'acme', '--plan', 'pro'], env)).code).toBe(0);
    const created = await runCli(['keys', 'create', '--account', 'acme', '--name', 'app', '--json'], env);
    expect(created.code).toBe(0);
    const k = JSON.parse(created.stdout) as { id: string; key: string };
    expect(await status(k.key)).toBe(200); // at once: the unknown id is looked up

    const rotated = await runCli(['keys', 'rotate', k.id, '--grace', '0', '--json'], env);
    expect(rotated.code).toBe(0);
    const r = JSON.parse(rotated.stdout) as { id: string; key: string };
    expect(await status(r.key)).toBe(200);

    expect((await runCli(['keys', 'revoke', r.id], env)).code).toBe(0);
    const t0 = Date.now();
    while ((await status(r.key)) !== 401 && Date.now() - t0 < 3_000) await new Promise((res) => setTimeout(res, 50));
    expect(await status(r.key)).toBe(401);
    expect(await status(k.key)).toBe(401); // grace 0: ended at once

    const list = await runCli(['keys', 'list', '--json'], env);
    expect((JSON.parse(list.stdout) as { status: string }[]).map((x) => x.status).sort()).toEqual([
      'expired',
      'revoked',
    ]);
    const accounts = await runCli(['accounts', 'list', '--json'], env);
    expect(JSON.parse(accounts.stdout)).toEqual([
      { name: 'acme', plan: 'pro', created_at: expect.any(String), active_keys: 0 },
    ]);
  });
});
