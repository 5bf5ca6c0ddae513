import { afterAll, beforeAll, expect, it } from 'vitest';
import { createAccount, setAccountPlan } from '../../src/auth/accounts.js';
import { KeyCache } from '../../src/auth/cache.js';
import { createKey, revokeKey, rotateKey } from '../../src/auth/keys.js';
import type { Db } from '../../src/store/types.js';
import { openStoreForFile } from '../helpers/file-stores.js';
import { describeEachBackend } from '../helpers/stores.js';

/** The store, counting the key lookups the cache makes (to prove what it does not ask). */
function counting(db: Db) {
  const stats = { lookups: 0, inFlight: 0, maxInFlight: 0 };
  const wrapped = {
    query: async <T>(sql: string, params?: unknown[]) => {
      const lookup = sql.includes('WHERE k.id = $1');
      if (lookup) {
        stats.lookups++;
        stats.maxInFlight = Math.max(stats.maxInFlight, ++stats.inFlight);
      }
      try {
        return await db.query<T>(sql, params);
      } finally {
        if (lookup) stats.inFlight--;
      }
    },
  };
  return { db: wrapped, stats };
}

describeEachBackend('key cache', (backend) => {
  let db: Db;
  let cache: KeyCache;
  let stats: ReturnType<typeof counting>['stats'];
  let first: { id: string; key: string };

  beforeAll(async () => {
    db = await openStoreForFile(backend.name);
    await createAccount(db, 'cacheacct', 'pro');
    first = await createKey(db, 'cacheacct', 'first');
    const c = counting(db);
    stats = c.stats;
    cache = new KeyCache(c.db, { refreshMs: 60_000, negativeTtlMs: 60_000 });
    await cache.start();
  });
  afterAll(() => cache.stop());

  it('answers a known key from memory, synchronously', () => {
    const p = cache.authenticateToken(first.key);
    expect(p).toEqual({ keyId: first.id, accountId: expect.any(String), accountName: 'cacheacct', plan: 'pro' });
    expect(stats.lookups).toBe(0);
  });

  it('refuses a wrong secret or a malformed key without asking the store', () => {
    // The right secret was seen just before: a wrong one of the same length is still refused,
    // and does not take its place.
    expect(cache.authenticateToken(first.key)).toBeDefined();
    expect(cache.authenticateToken(first.key.slice(0, -4) + 'AAAA')).toBeUndefined();
    expect(cache.authenticateToken(first.key.slice(0, -4) + 'AAAA')).toBeUndefined();
    expect(cache.authenticateToken(first.key)).toBeDefined();
    expect(cache.authenticateToken('mk_nothex')).toBeUndefined();
    expect(cache.authenticateToken('')).toBeUndefined();
    expect(stats.lookups).toBe(0);
  });

  it('a key created after start works at once (one lookup), then from memory', async () => {
    const k = await createKey(db, 'cacheacct');
    const p = cache.authenticateToken(k.key);
    expect(p).toBeInstanceOf(Promise);
    expect((await p)?.keyId).toBe(k.id);
    expect(cache.authenticateToken(k.key)).toMatchObject({ keyId: k.id });
    expect(stats.lookups).toBe(1);
  });

  it('an unknown id is looked up once, then remembered; a flood is bounded', async () => {
    const ghost = `mk_00000000abcd_${'g'.repeat(40)}`;
    const before = stats.lookups;
    expect(await cache.authenticateToken(ghost)).toBeUndefined();
    expect(await cache.authenticateToken(ghost)).toBeUndefined();
    expect(stats.lookups).toBe(before + 1);
    const flood = Array.from({ length: 200 }, (_, i) => `mk_${(0xf00000000000 + i).toString(16)}_${'f'.repeat(40)}`);
    const results = await Promise.all(flood.map((t) => cache.authenticateToken(t)));
    expect(results.every((r) => r === undefined)).toBe(true);
    expect(stats.maxInFlight).toBeLessThanOrEqual(4);
    expect(stats.lookups - before - 1).toBeLessThanOrEqual(200);
  });

  it('a revoked key is refused after the next refresh', async () => {
    const k = await createKey(db, 'cacheacct');
    expect(await cache.authenticateToken(k.key)).toBeDefined();
    await revokeKey(db, k.id);
    await cache.refresh();
    expect(cache.authenticateToken(k.key)).toBeUndefined();
  });

  it('rotation: the old key works for its grace, then not; the new one at once', async () => {
    const old = await createKey(db, 'cacheacct', 'rot');
    await cache.refresh();
    const fresh = await rotateKey(db, old.id, 2);
    expect(fresh.name).toBe('rot');
    await cache.refresh();
    expect(cache.authenticateToken(old.key)).toMatchObject({ keyId: old.id });
    expect(await cache.authenticateToken(fresh.key)).toMatchObject({ keyId: fresh.id });
    await new Promise((r) => setTimeout(r, 2_100));
    expect(cache.authenticateToken(old.key)).toBeUndefined(); // expiry needs no refresh
    expect(cache.authenticateToken(fresh.key)).toMatchObject({ keyId: fresh.id });
    const again = await rotateKey(db, fresh.id, 0);
    await cache.refresh();
    expect(cache.authenticateToken(fresh.key)).toBeUndefined();
    expect(await cache.authenticateToken(again.key)).toMatchObject({ keyId: again.id });
    await expect(rotateKey(db, old.id, 60)).rejects.toThrow(/revoked or expired/);
  });

  it('a plan change reaches the principal at the next refresh', async () => {
    await setAccountPlan(db, 'cacheacct', 'free');
    await cache.refresh();
    expect(cache.authenticateToken(first.key)).toMatchObject({ plan: 'free' });
  });
});
