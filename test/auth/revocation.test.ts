import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, revokeKey, rotateKey } from '../../src/auth/keys.js';
import { openPostgres } from '../../src/store/postgres.js';
import type { Db } from '../../src/store/types.js';
import { startProxyDaemon, type ProxyDaemon } from '../helpers/proxy.js';
import { databaseForFile } from '../helpers/file-stores.js';
import { postgresUrl } from '../helpers/stores.js';
import { startFakeUpstream } from '../helpers/upstreams.js';

/** Two sidecars sharing one PostgreSQL, default refresh (2 s): CONTRACT §1 says 5 s at most. */
describe.skipIf(!postgresUrl)('revocation and rotation across sidecars', () => {
  let a: ProxyDaemon;
  let b: ProxyDaemon;
  let admin: Db;

  beforeAll(async () => {
    const fake = await startFakeUpstream();
    const databaseUrl = await databaseForFile();
    a = await startProxyDaemon({ upstreams: { openai: `${fake.origin}/v1` }, databaseUrl });
    b = await startProxyDaemon({ upstreams: { openai: `${fake.origin}/v1` }, databaseUrl });
    admin = openPostgres(databaseUrl); // what `meter keys …` does from elsewhere
  });
  afterAll(() => admin?.close());

  const status = async (d: ProxyDaemon, key: string) =>
    (await fetch(`${d.url}/proxy/openai/models`, { headers: { authorization: `Bearer ${key}` } })).status;

  /** Polls every sidecar until `key` gets `want`; returns how long the slowest took. */
  async function untilEverywhere(key: string, want: number, limitMs: number): Promise<number> {
    const t0 = Date.now();
    const pending = new Set([a, b]);
    while (pending.size > 0 && Date.now() - t0 < limitMs) {
      for (const d of [...pending]) if ((await status(d, key)) === want) pending.delete(d);
      if (pending.size > 0) await new Promise((r) => setTimeout(r, 100));
    }
    expect(pending.size).toBe(0);
    return Date.now() - t0;
  }

  it('a key made on one sidecar works at once on both; revoked, it fails on both within 5 s', async () => {
    const k = await createKey(admin, a.account, 'fleet');
    expect(await status(a, k.key)).toBe(200);
    expect(await status(b, k.key)).toBe(200);
    await revokeKey(admin, k.id);
    const took = await untilEverywhere(k.key, 401, 5_000);
    expect(took).toBeLessThan(5_000);
  });

  it('rotate: the new key works at once everywhere, the old one until its grace ends', async () => {
    const old = await createKey(admin, a.account, 'rotating');
    expect(await status(a, old.key)).toBe(200);
    expect(await status(b, old.key)).toBe(200);
    const fresh = await rotateKey(admin, old.id, 3);
    expect(await status(a, fresh.key)).toBe(200);
    expect(await status(b, fresh.key)).toBe(200);
    expect(await status(a, old.key)).toBe(200);
    await untilEverywhere(old.key, 401, 3_000 + 5_000);
    expect(await status(b, fresh.key)).toBe(200);
  });
});
