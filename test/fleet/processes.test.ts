import { beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import { setBudget } from '../../src/budget/admin.js';
import { createBudget } from '../../src/budget/budgets-admin.js';
import { parseScope } from '../../src/budget/scope.js';
import { formatUnits, toUnits } from '../../src/money.js';
import { migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import type { Db } from '../../src/store/types.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { type RunningDaemon } from '../helpers/daemon.js';
import { eventually, sleep, spawnSidecars } from '../helpers/fleet.js';
import { ACTUAL, answer, answerAfter, burst, post, WORST, WORST_TOKENS } from '../helpers/burst.js';
import { createTestDatabase, postgresUrl } from '../helpers/stores.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstreams.js';

// Three `meter start` processes on one PostgreSQL database (CONTRACT §6 "The fleet"), 64 calls at
// once with a known worst case (test/helpers/burst.ts) spread over them.
const SIDECARS = 3;
/** Each limit is set so that exactly this many calls fit at once. */
const FIT = 20;
const LEASE_MS = 3_000;
/** $0.016: three calls' real cost ($0.00425 each) and most of a fourth, far below one call's
 *  worst case without max_tokens. */
const SMALL = '0.016';

let db: Db;
let upstream: FakeUpstream;
let daemons: RunningDaemon[];
const keys: Record<string, string> = {};
const burstOn = (account: string, headers: Record<string, string> = {}) =>
  burst(
    upstream,
    daemons.map((d) => d.url),
    keys[account]!,
    { headers },
  );

const written = async (account: string) =>
  (
    await db.query<{ spend: string; requests: string }>(
      `SELECT COALESCE(sum(d.spend), 0)::text AS spend, COALESCE(sum(d.requests), 0)::text AS requests
         FROM usage_daily d JOIN accounts a ON a.id = d.account_id WHERE a.name = $1`,
      [account],
    )
  )[0]!;

describe.skipIf(!postgresUrl)('limits on a fleet of three sidecar processes', () => {
  beforeAll(async () => {
    const url = await createTestDatabase();
    db = openPostgres(url);
    atFileEnd(() => db.close());
    await migrate(db);
    // The Free plan's quota is the one under test there, not its calls a minute.
    await db.query(`UPDATE plans SET monthly_call_quota = ${FIT}, rate_limit_per_minute = 1000 WHERE name = 'free'`);
    for (const [account, plan] of [
      ['capped', 'pro'],
      ['quota', 'free'],
      ['calls', 'pro'],
      ['tokens', 'pro'],
      ['killed', 'pro'],
      ['tenants', 'pro'],
      ['small', 'pro'],
    ] as const) {
      await createAccount(db, account, plan);
      const { id, key } = await createKey(db, account);
      keys[account] = key;
      if (account === 'calls' || account === 'tokens') {
        await db.query(
          `INSERT INTO limit_overrides (account_id, key_id, calls_per_minute, tokens_per_minute)
           SELECT a.id, $2, $3, $4 FROM accounts a WHERE a.name = $1`,
          [account, id, account === 'calls' ? FIT : null, account === 'tokens' ? FIT * WORST_TOKENS + 10 : null],
        );
      }
    }
    // Room for FIT worst cases less half of one: a call is admitted while any room is left, so the
    // FIT-th call, admitted with half a worst case left, is the last.
    await setBudget(db, 'capped', formatUnits(WORST * BigInt(FIT) - WORST / 2n), true);
    await setBudget(db, 'killed', formatUnits(WORST * 10n), true);
    // A strict budget of one tenant's calls (a tag scope), with room for FIT worst cases and half
    // of one more: only calls whose worst case fits.
    await createBudget(db, 'tenants', {
      amount: formatUnits(WORST * BigInt(FIT) + WORST / 2n),
      scope: parseScope('tag:tenant=globex'),
      window: 'day',
      timezone: 'Asia/Kolkata',
      action: 'block',
      strict: true,
    });
    // Caps smaller than one call's worst case (a call without max_tokens: gpt-4o's whole output
    // window, about $1.28), one of each rule.
    await createBudget(db, 'small', { amount: SMALL, scope: parseScope('tag:cap=loose'), action: 'block' });
    await createBudget(db, 'small', {
      amount: SMALL,
      scope: parseScope('tag:cap=strict'),
      action: 'block',
      strict: true,
    });
    upstream = await startFakeUpstream();
    daemons = await spawnSidecars(SIDECARS, url, upstream, {
      METER_FLEET_LEASE_MS: String(LEASE_MS),
      METER_FLEET_SYNC_MS: '250',
    });
  }, 180_000);

  it('the hard cap: calls are admitted while spend and the calls in flight leave room, exactly that many', async () => {
    const answers = await burstOn('capped');
    const admitted = answers.filter((a) => a.status === 200).length;
    expect(answers.filter((a) => a.status !== 200).every((a) => a.status === 402 && a.code === 'budget_exceeded')).toBe(
      true,
    );
    expect(admitted).toBe(FIT);
    await eventually(async () => (await written('capped')).requests === String(FIT), 10_000, 'every call written');
    const spend = toUnits((await written('capped')).spend);
    expect(spend).toBe(ACTUAL * BigInt(FIT));
  }, 60_000);

  it('a cap smaller than one worst case admits calls until its spend reaches it, no further than the calls then in flight; a strict one never passes it', async () => {
    answerAfter(upstream, Promise.resolve());
    const open = JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hello' }] });
    const wave = (cap: string) =>
      Promise.all(
        Array.from({ length: 9 }, (_, i) =>
          fetch(`${daemons[i % SIDECARS]!.url}/proxy/openai/v1/chat/completions`, {
            method: 'POST',
            headers: {
              'x-meter-key': keys.small!,
              authorization: 'Bearer sk-provider',
              'content-type': 'application/json',
              'x-metering-tags': `cap=${cap}`,
            },
            body: open,
          }).then(async (r) => (await r.text(), r.status)),
        ),
      );
    const spendOf = async (cap: string) =>
      toUnits(
        (
          await db.query<{ s: string }>(
            `SELECT coalesce(sum(cost), 0)::text AS s FROM usage_events WHERE tags ->> 'cap' = $1`,
            [cap],
          )
        )[0]!.s,
      );
    const waves: number[] = [];
    for (let i = 0; i < 12; i++) {
      const statuses = await wave('loose');
      expect(statuses.every((st) => st === 200 || st === 402)).toBe(true);
      const admitted = statuses.filter((st) => st === 200).length;
      waves.push(admitted);
      await eventually(
        async () => (await spendOf('loose')) === ACTUAL * BigInt(waves.reduce((a, b) => a + b, 0)),
        10_000,
        'the wave written',
      );
      if (admitted === 0) break;
    }
    // While spend is below the cap, a call admitted holds its worst case (more than the whole cap)
    // until it ends, so the fleet admits one call at a time, until spend reaches the cap: then
    // the whole wave is refused.
    const calls = Math.ceil(Number(toUnits(SMALL)) / Number(ACTUAL));
    expect(waves.reduce((a, b) => a + b, 0)).toBe(calls);
    expect(waves.at(-1)).toBe(0);
    const spent = await spendOf('loose');
    expect(spent).toBeGreaterThanOrEqual(toUnits(SMALL));
    expect(spent - toUnits(SMALL)).toBeLessThan(ACTUAL); // past it by less than the one call in flight
    // Strict: no call's worst case fits, so none is admitted and nothing is spent.
    expect(await wave('strict')).toEqual(Array(9).fill(402));
    expect(await spendOf('strict')).toBe(0n);
  }, 120_000);

  // Fleet-wide, not per sidecar: kept per sidecar, 20 would fit on each, 60 in all.
  it('a tag-scoped budget that blocks: exactly the calls of that tenant that fit, others pass', async () => {
    const answers = await burstOn('tenants', { 'X-Tenant-ID': 'globex' });
    expect(answers.filter((a) => a.status === 200)).toHaveLength(FIT);
    for (const a of answers.filter((x) => x.status !== 200))
      expect([a.status, a.code]).toEqual([402, 'budget_exceeded']);
    // Another tenant is not subject to it.
    const other = await answer(await post(daemons[0]!.url, keys.tenants!, { 'X-Tenant-ID': 'initech' }));
    expect(other.status).toBe(200);
  }, 60_000);

  it('the monthly quota admits exactly its count across the fleet', async () => {
    const answers = await burstOn('quota');
    expect(answers.filter((a) => a.status === 200)).toHaveLength(FIT);
    for (const a of answers.filter((x) => x.status !== 200))
      expect([a.status, a.code]).toEqual([429, 'quota_exceeded']);
    await eventually(async () => (await written('quota')).requests === String(FIT), 10_000, 'every call written');
  }, 60_000);

  it('calls a minute per key: exactly the limit in the minute, and RateLimit-Remaining is the fleet’s', async () => {
    const answers = await burstOn('calls');
    expect(answers.filter((a) => a.status === 200)).toHaveLength(FIT);
    for (const a of answers.filter((x) => x.status !== 200)) expect([a.status, a.code]).toEqual([429, 'rate_limited']);
    // Every sidecar reports the fleet's state: nothing left this minute.
    for (const d of daemons) {
      const a = await answer(await post(d.url, keys.calls!));
      expect([a.status, a.remaining]).toEqual([429, '0']);
    }
  }, 60_000);

  it('tokens a minute per key: each call reserves its worst case, exactly the calls that fit are admitted', async () => {
    const answers = await burstOn('tokens');
    expect(answers.filter((a) => a.status === 200)).toHaveLength(FIT);
    for (const a of answers.filter((x) => x.status !== 200)) expect([a.status, a.code]).toEqual([429, 'rate_limited']);
  }, 60_000);

  it('a sidecar killed with -9 while holding a lease: its unused share comes back within two lease periods', async () => {
    answerAfter(upstream, Promise.resolve());
    const victim = daemons[2]!;
    // A few calls in a row make the victim lease a slice beyond them.
    for (let i = 0; i < 3; i++) expect((await post(victim.url, keys.killed!)).status).toBe(200);
    await eventually(async () => (await written('killed')).requests === '3', 10_000, 'the victim’s calls written');
    const [lease] = await db.query<{ granted: string; held: string }>(
      `SELECT granted::text, held::text FROM fleet_leases
        WHERE limit_key = (SELECT 'budget:' || b.id FROM budgets b JOIN accounts a ON a.id = b.account_id WHERE a.name = 'killed')
          AND granted > held`,
    );
    expect(lease).toBeDefined(); // it holds an unused slice
    victim.child.kill('SIGKILL');
    daemons = daemons.slice(0, 2);
    // The budget is 10 worst cases: with 3 calls spent, a call is admitted while spend is below
    // it, so the fleet admits exactly this many more.
    const budget = WORST * 10n;
    let expected = 0;
    for (let spent = ACTUAL * 3n; spent < budget; spent += ACTUAL) expected++;
    const t0 = Date.now();
    let admitted = 0;
    while (admitted < expected && Date.now() - t0 < 2 * LEASE_MS + 5_000) {
      if ((await post(daemons[0]!.url, keys.killed!)).status === 200) admitted++;
      else await sleep(100);
    }
    const ms = Date.now() - t0;
    console.info(`fleet: a killed sidecar's share came back in ${ms} ms (lease ${LEASE_MS} ms)`);
    expect(admitted).toBe(expected);
    expect((await post(daemons[1]!.url, keys.killed!)).status).toBe(402); // and not one more
    expect(ms).toBeLessThan(2 * LEASE_MS + 5_000);
  }, 60_000);
});
