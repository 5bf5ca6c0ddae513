/** The analytics component inside the daemon, authenticating real service keys (the key cache
 *  shared with the proxy): a new key works, a revoked one stops, a plan change gates at once. */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { analyticsComponent } from '../../src/analytics/index.js';
import { createAccount, setAccountPlan } from '../../src/auth/accounts.js';
import { createKey, revokeKey } from '../../src/auth/keys.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { startDaemon, type Daemon } from '../../src/server/daemon.js';
import { describeEachBackend } from '../helpers/stores.js';

describeEachBackend('analytics in the daemon', (backend) => {
  let daemon: Daemon;

  beforeAll(async () => {
    const store = await backend.config();
    const config = loadConfig({
      METER_HOST: '127.0.0.1',
      METER_PORT: '0',
      METER_DATA_DIR: store.dataDir,
      METER_KEY_REFRESH_MS: '100',
      ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
    });
    daemon = await startDaemon(config, createLogger('silent'), async (ctx, start) =>
      start(await analyticsComponent(ctx)),
    );
  });
  afterAll(() => daemon?.close());

  const get = (path: string, headers: Record<string, string>) => fetch(daemon.url + path, { headers });
  const eventually = async (check: () => Promise<boolean>) => {
    for (let i = 0; i < 50 && !(await check()); i++) await new Promise((r) => setTimeout(r, 100));
    expect(await check()).toBe(true);
  };

  it('serves a new key at once, in either header, and stops serving it once revoked', async () => {
    await createAccount(daemon.store, 'analytics-e2e', 'pro');
    const { id, key } = await createKey(daemon.store, 'analytics-e2e');
    const r = await get('/analytics/summary', { authorization: `Bearer ${key}` });
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ spend: 0, requests: 0, by_model: [] });
    expect((await get('/analytics/daily?days=2', { 'x-meter-key': key })).status).toBe(200);
    expect((await get('/analytics/daily', { authorization: 'Bearer mk_000000000000_nope' })).status).toBe(401);

    await setAccountPlan(daemon.store, 'analytics-e2e', 'free');
    await eventually(async () => (await get('/analytics/events', { authorization: `Bearer ${key}` })).status === 403);

    await revokeKey(daemon.store, id);
    await eventually(async () => (await get('/analytics/summary', { authorization: `Bearer ${key}` })).status === 401);
  });
});
