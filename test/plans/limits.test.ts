import { describe, expect, it } from 'vitest';
import { Admissions } from '../../src/plans/admission.js';
import { PlanBook } from '../../src/plans/plans.js';
import { windowBounds } from '../../src/calendar.js';
import { QuotaTracker } from '../../src/plans/quota.js';
import { RateLimiter } from '../../src/plans/rate-limit.js';
import type { Db } from '../../src/store/types.js';
import { describeEachBackend } from '../helpers/stores.js';
import { uuidv7 } from '../../src/metering/ids.js';
import { insertBatch } from '../../src/store/event-batch.js';
import { makeEvents } from '../metering/events.js';

const T0 = Date.UTC(2026, 10, 21, 12, 0, 30); // 30 s into a minute

describe('rate limiter', () => {
  it('allows the limit per key per minute, then refuses until the next minute', () => {
    const rl = new RateLimiter();
    const seen = Array.from({ length: 3 }, () => rl.take('k1', 3, T0));
    expect(seen.map((s) => [s.allowed, s.remaining])).toEqual([
      [true, 2],
      [true, 1],
      [true, 0],
    ]);
    const refused = rl.take('k1', 3, T0 + 1_000);
    expect(refused).toEqual({ allowed: false, limit: 3, remaining: 0, resetSeconds: 29 });
    expect(rl.take('k2', 3, T0).allowed).toBe(true); // per key
    expect(rl.take('k1', 3, T0 + 30_000)).toMatchObject({ allowed: true, remaining: 2, resetSeconds: 60 });
  });
});

describeEachBackend('plans against the store', (backend) => {
  let db: Db;
  let free: string;
  let pro: string;

  const seedCalls = async (accountId: string, n: number, day: string) =>
    db.query(
      `INSERT INTO usage_daily (account_id, day, provider, model, requests) VALUES ($1, $2, 'openai', 'gpt-4o', $3)
       ON CONFLICT (account_id, day, provider, model) DO UPDATE SET requests = usage_daily.requests + EXCLUDED.requests`,
      [accountId, day, n],
    );

  it('loads the default plans', async () => {
    db = await backend.open();
    [{ id: free }] = (await db.query<{ id: string }>(`INSERT INTO accounts (name) VALUES ('f') RETURNING id`)) as [
      { id: string },
    ];
    [{ id: pro }] = (await db.query<{ id: string }>(
      `INSERT INTO accounts (name, plan) VALUES ('p', 'pro') RETURNING id`,
    )) as [{ id: string }];
    const book = new PlanBook();
    await book.refresh(db);
    expect(book.get('free')).toMatchObject({
      monthlyCallQuota: 10000,
      maxActiveKeys: 2,
      rawRetentionDays: 7,
      rateLimitPerMinute: 60,
      analytics: ['summary', 'daily', 'reconciliation'],
      hardCap: false,
    });
    expect(book.get('pro')).toMatchObject({
      monthlyCallQuota: null,
      maxActiveKeys: 25,
      rawRetentionDays: 90,
      rateLimitPerMinute: 3000,
      hardCap: true,
      rollupRetentionMonths: 13,
    });
  }, 120_000); // opens the store: the embedded one starts slowly on a busy machine

  it('counts month-to-date calls fleet-wide plus local admissions, and refuses past the quota', async () => {
    await db.query(`UPDATE plans SET monthly_call_quota = 10 WHERE name = 'free'`);
    const now = Date.now();
    const today = new Date(now).toISOString().slice(0, 10);
    const lastMonth = new Date(windowBounds('month', now).start - 86_400_000).toISOString().slice(0, 10);
    await seedCalls(free, 7, today); // written by other sidecars this month
    await seedCalls(free, 500, lastMonth); // last month does not count
    const q = new QuotaTracker();
    await q.refresh(db, now);
    expect(q.used(free, now)).toBe(7);
    expect([q.take(free, 10, now), q.take(free, 10, now), q.take(free, 10, now)]).toEqual([true, true, true]);
    expect(q.take(free, 10, now)).toBe(false);
    // Another sidecar's calls become visible at the next refresh.
    await seedCalls(free, 3, today);
    await q.refresh(db, now);
    expect(q.used(free, now)).toBe(10);
    expect(q.take(pro, null, now)).toBe(true); // no quota
  });

  it('counts each call it admitted exactly once: locally until a re-read shows its event, then only there', async () => {
    await db.query(`UPDATE plans SET monthly_call_quota = 100 WHERE name = 'free'`);
    const [{ id: own }] = (await db.query<{ id: string }>(
      `INSERT INTO accounts (name) VALUES ('f2') RETURNING id`,
    )) as [{ id: string }];
    const q = new QuotaTracker();
    await q.refresh(db);
    const base = q.used(own);
    const time = new Date();
    const calls = [0, 1, 2].map(() => ({ id: uuidv7(time.getTime()), time }));
    for (const c of calls) expect(q.take(own, 100, Date.now(), c)).toBe(true);
    expect(q.used(own)).toBe(base + 3);
    await q.refresh(db); // nothing written yet: still counted here
    expect(q.used(own)).toBe(base + 3);
    for (const [i, c] of calls.entries()) {
      const [event] = makeEvents(1, i + 1, { id: c.id, time: c.time.toISOString(), accountId: own });
      await insertBatch(db, [event!]);
      await q.refresh(db);
      expect(q.used(own)).toBe(base + 3); // moved from the local count to the re-read one
    }
    await q.refresh(db);
    expect(q.used(own)).toBe(base + 3);
  });

  it('admission answers rate_limited and quota_exceeded with Retry-After and RateLimit headers; an upgrade frees calls', async () => {
    await db.query(`UPDATE plans SET monthly_call_quota = 12, rate_limit_per_minute = 100 WHERE name = 'free'`);
    const book = new PlanBook();
    await book.refresh(db);
    const quota = new QuotaTracker();
    await quota.refresh(db);
    const adm = new Admissions(book, new RateLimiter(), quota);
    const who = { keyId: 'aaaaaaaaaaaa', accountId: free, accountName: 'f', plan: 'free' };
    const now = Date.now();
    const results = Array.from({ length: 3 }, () => adm.admit(who, { now }));
    expect(results.map((r) => r.ok)).toEqual([true, true, false]); // 10 written + 2 admitted
    const refused = results[2]!;
    expect(refused).toMatchObject({ ok: false, status: 429, code: 'quota_exceeded' });
    expect(refused.headers['ratelimit-limit']).toBe('100');
    const retry = Number(refused.headers['retry-after']);
    expect(retry).toBe(Math.ceil((windowBounds('month', now).end - now) / 1000));
    expect(refused.ok === false && refused.message).toMatch(/monthly quota of 12 proxied calls on the free plan/);
    expect(adm.admit({ ...who, plan: 'pro' }, { now }).ok).toBe(true); // the principal carries the new plan

    await db.query(`UPDATE plans SET rate_limit_per_minute = 2 WHERE name = 'pro'`);
    await book.refresh(db);
    const proWho = { ...who, keyId: 'bbbbbbbbbbbb', accountId: pro, plan: 'pro' };
    const t = Date.UTC(2026, 10, 21, 12, 0, 50);
    expect(adm.admit(proWho, { now: t })).toMatchObject({
      ok: true,
      headers: { 'ratelimit-remaining': '1', 'ratelimit-reset': '10' },
    });
    adm.admit(proWho, { now: t });
    expect(adm.admit(proWho, { now: t })).toMatchObject({
      ok: false,
      code: 'rate_limited',
      headers: { 'retry-after': '10', 'ratelimit-remaining': '0' },
    });
  });
});
