import { expect, it } from 'vitest';
import { BudgetBook } from '../../src/budget/book.js';
import { FleetAdmissions, FleetLedger, OverrideBook } from '../../src/fleet/index.js';
import { PlanBook } from '../../src/plans/plans.js';
import { windowBounds } from '../../src/calendar.js';
import { Pricer } from '../../src/pricing/index.js';
import type { Admission } from '../../src/proxy/handler.js';
import type { Db } from '../../src/store/types.js';
import { describeEachBackend } from '../helpers/stores.js';
import { uuidv7 } from '../../src/metering/ids.js';
import { insertBatch } from '../../src/store/event-batch.js';
import { makeEvents } from '../metering/events.js';

const quiet = { warn() {}, info() {}, error() {} };

/** Admission as the proxy runs it, on this store, for one sidecar. */
async function admissions(db: Db) {
  const plans = new PlanBook();
  await plans.refresh(db);
  const overrides = new OverrideBook();
  await overrides.reload(db);
  const ledger = new FleetLedger(db, quiet);
  const adm = new FleetAdmissions(plans, overrides, ledger, new Pricer(), { book: new BudgetBook() });
  const admit = async (p: Parameters<FleetAdmissions['admit']>[0], id = uuidv7(Date.now())): Promise<Admission> =>
    adm.admit(p, { id, time: new Date() });
  return { plans, overrides, ledger, adm, admit };
}

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
      tokensPerMinute: null,
      accountCallsPerMinute: null,
      accountTokensPerMinute: null,
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

  it('the quota counts month-to-date calls fleet-wide plus this sidecar’s admissions, and refuses past it', async () => {
    await db.query(`UPDATE plans SET monthly_call_quota = 10, rate_limit_per_minute = 100 WHERE name = 'free'`);
    const now = Date.now();
    const today = new Date(now).toISOString().slice(0, 10);
    const lastMonth = new Date(windowBounds('month', now).start - 86_400_000).toISOString().slice(0, 10);
    await seedCalls(free, 7, today); // written by other sidecars this month
    await seedCalls(free, 500, lastMonth); // last month does not count
    const { admit, ledger } = await admissions(db);
    const who = { keyId: 'aaaaaaaaaaaa', accountId: free, accountName: 'f', plan: 'free' };
    const results = [await admit(who), await admit(who), await admit(who), await admit(who)];
    expect(results.map((r) => r.ok)).toEqual([true, true, true, false]);
    const refused = results[3]!;
    expect(refused).toMatchObject({ ok: false, status: 429, code: 'quota_exceeded' });
    expect(refused.ok === false && refused.message).toMatch(/monthly quota of 10 proxied calls on the free plan/);
    expect(refused.headers['ratelimit-limit']).toBe('100');
    expect(refused.headers['ratelimit-remaining']).toBe('97'); // the refused call took no slot
    const retry = Number(refused.headers['retry-after']);
    expect(Math.abs(retry - (windowBounds('month', Date.now()).end - Date.now()) / 1000)).toBeLessThan(5);
    // The principal carries its plan: on Pro (no quota) the call passes.
    expect((await admit({ ...who, plan: 'pro' })).ok).toBe(true);
    await ledger.stop();
  });

  it('counts each call it admitted exactly once: in its lease until the database shows its event, then only there', async () => {
    await db.query(`UPDATE plans SET monthly_call_quota = 5 WHERE name = 'free'`);
    const [{ id: own }] = (await db.query<{ id: string }>(
      `INSERT INTO accounts (name) VALUES ('f2') RETURNING id`,
    )) as [{ id: string }];
    const { admit, ledger } = await admissions(db);
    const who = { keyId: 'cccccccccccc', accountId: own, accountName: 'f2', plan: 'free' };
    const time = new Date();
    const ids = [0, 1, 2].map(() => uuidv7(time.getTime()));
    for (const id of ids) expect((await admit(who, id)).ok).toBe(true);
    // The lease object itself: once its last call is counted by the database it is empty, and a
    // background pass may forget it from the ledger's list between two statements here.
    const lease = ledger.leases().find((l) => l.spec.key === `quota:${own}`)!;
    const quota = () => lease;
    for (const [i, id] of ids.entries()) {
      const [event] = makeEvents(1, i + 1, { id, time: time.toISOString(), accountId: own });
      ledger.settle(id, () => undefined, event!.time);
      await insertBatch(db, [event!]);
      await ledger.sync(Date.now() + 5_000); // idle: the lease checks which events are written
      // Moved from the lease to the database's count, never both, never neither.
      expect(quota().used + quota().held).toBe(3n);
      expect(quota().used).toBe(BigInt(i + 1));
    }
    // Two more fit the quota of 5, not three.
    const more = [await admit(who), await admit(who), await admit(who)];
    expect(more.map((r) => r.ok)).toEqual([true, true, false]);
    await ledger.stop();
  });

  it('per-minute limits of a key and of an account, from the plan or an override', async () => {
    await db.query(`UPDATE plans SET rate_limit_per_minute = 2 WHERE name = 'pro'`);
    const { admit, overrides, ledger } = await admissions(db);
    const who = { keyId: 'bbbbbbbbbbbb', accountId: pro, accountName: 'p', plan: 'pro' };
    expect(await admit(who)).toMatchObject({
      ok: true,
      headers: { 'ratelimit-limit': '2', 'ratelimit-remaining': '1' },
    });
    await admit(who);
    const refused = await admit(who);
    expect(refused).toMatchObject({ ok: false, code: 'rate_limited', headers: { 'ratelimit-remaining': '0' } });
    expect(refused.ok === false && refused.message).toMatch(/rate limit of 2 calls a minute per key/);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(59);
    // An override for this key lifts it; one for the account caps all its keys together.
    await db.query(
      `INSERT INTO limit_overrides (account_id, key_id, calls_per_minute) VALUES ($1, 'bbbbbbbbbbbb', 5), ($1, '', 4)`,
      [pro],
    );
    await overrides.reload(db);
    const other = { ...who, keyId: 'dddddddddddd' };
    const seq = [await admit(who), await admit(who), await admit(other), await admit(other), await admit(who)];
    // The key's 3rd and 4th of 5; the other key's 1st and 2nd of the plan's 2; then the account's
    // 4 are used, though the first key has room left.
    expect(seq.map((r) => r.ok)).toEqual([true, true, true, true, false]);
    const last = seq[4]!;
    expect(last.ok === false && last.message).toMatch(/rate limit of 4 calls a minute for account p/);
    await ledger.stop();
  });
});
