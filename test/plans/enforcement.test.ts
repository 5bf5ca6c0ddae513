import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { setAccountPlan } from '../../src/auth/accounts.js';
import { setBudget } from '../../src/budget/admin.js';
import { eventually, openaiVia, sleep, startFleet } from '../helpers/fleet.js';
import { postgresUrl } from '../helpers/stores.js';

const ask = (client: OpenAI) =>
  client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }).withResponse();

async function refusal(client: OpenAI) {
  const err = await ask(client).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OpenAI.APIError);
  return err as InstanceType<typeof OpenAI.APIError>;
}

describe.skipIf(!postgresUrl)('plan limits on two sidecars sharing PostgreSQL', () => {
  it('the monthly quota is fleet-wide, answers 429 quota_exceeded with Retry-After, and an upgrade frees calls at once', async () => {
    const {
      db,
      key,
      upstream,
      daemons: [a, b],
    } = await startFleet({
      account: 'quota-acct',
      plan: 'free',
      sidecars: 2,
      setup: (db) => db.query(`UPDATE plans SET monthly_call_quota = 6 WHERE name = 'free'`),
    });
    const viaA = openaiVia(a!, key);
    const viaB = openaiVia(b!, key);

    for (let i = 0; i < 3; i++) {
      const { response } = await ask(viaA);
      expect(response.headers.get('ratelimit-limit')).toBe('60');
      await ask(viaB);
    }
    // Each sidecar admitted 3 itself; once all 6 are written (waited for: a loaded machine
    // flushes late), a re-read or two later each sidecar sees the other's 3.
    await eventually(
      async () =>
        (
          await db.query<{ n: number }>(
            `SELECT coalesce(sum(d.requests), 0)::int AS n FROM usage_daily d JOIN accounts a ON a.id = d.account_id WHERE a.name = 'quota-acct'`,
          )
        )[0]!.n === 6,
      10_000,
      'the 6 calls written',
    );
    await sleep(600);
    for (const client of [viaA, viaB]) {
      const err = await refusal(client);
      expect(err.status).toBe(429);
      expect(err.code).toBe('quota_exceeded');
      expect(err.message).toContain('monthly quota of 6 proxied calls on the free plan');
      const now = new Date();
      const nextMonth = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
      const retry = Number(err.headers?.get('retry-after'));
      expect(Math.abs(retry - (nextMonth - now.getTime()) / 1000)).toBeLessThan(5);
      expect(err.headers?.get('ratelimit-remaining')).not.toBeNull();
    }
    expect(upstream.requests).toHaveLength(6); // refused calls never reached the provider

    await setAccountPlan(db, 'quota-acct', 'pro');
    const ms = await eventually(
      async () => {
        const results = await Promise.allSettled([ask(viaA), ask(viaB)]);
        return results.every((r) => r.status === 'fulfilled');
      },
      5_000,
      'upgrade frees calls on both sidecars',
    );
    expect(ms).toBeLessThan(5_000);
  });

  it('the per-key rate limit answers 429 rate_limited with RateLimit headers on every response', async () => {
    const {
      key,
      upstream,
      daemons: [daemon],
    } = await startFleet({
      account: 'rate-acct',
      plan: 'pro',
      sidecars: 1,
      setup: (db) => db.query(`UPDATE plans SET rate_limit_per_minute = 3 WHERE name = 'pro'`),
    });
    const client = openaiVia(daemon!, key);
    // Keep the four calls inside one minute window.
    const second = new Date().getUTCSeconds();
    if (second > 50) await sleep((61 - second) * 1000);

    const remaining: (string | null)[] = [];
    for (let i = 0; i < 3; i++) {
      const { response } = await ask(client);
      expect(response.headers.get('ratelimit-limit')).toBe('3');
      remaining.push(response.headers.get('ratelimit-remaining'));
    }
    expect(remaining).toEqual(['2', '1', '0']);
    const err = await refusal(client);
    expect(err.status).toBe(429);
    expect(err.code).toBe('rate_limited');
    const reset = Number(err.headers?.get('ratelimit-reset'));
    expect(reset).toBeGreaterThan(0);
    expect(reset).toBeLessThanOrEqual(60);
    expect(err.headers?.get('retry-after')).toBe(String(reset));
    expect(upstream.requests).toHaveLength(3);
  });

  it('RateLimit-* goes on every answer to an authenticated call; only admitted calls take a slot or count toward the quota', async () => {
    const {
      db,
      key,
      upstream,
      daemons: [daemon],
    } = await startFleet({
      account: 'edges',
      plan: 'pro',
      sidecars: 1,
      usage: { prompt: 1000, completion: 1000 },
      setup: async (db) => {
        await db.query(`UPDATE plans SET rate_limit_per_minute = 10, monthly_call_quota = 3 WHERE name = 'pro'`);
        // Room for one call's worst case (10 output tokens, the input from the body's size), not two;
        // its real cost (1000 + 1000 tokens) takes spend past the budget.
        await setBudget(db, 'edges', '0.0002', true);
      },
    });
    const second = new Date().getUTCSeconds();
    if (second > 45) await sleep((61 - second) * 1000); // all calls in one minute window
    const post = (slug = 'openai', headers: Record<string, string> = {}) =>
      fetch(`${daemon!.url}/proxy/${slug}/v1/chat/completions`, {
        method: 'POST',
        headers: {
          'x-meter-key': key,
          authorization: 'Bearer sk-provider',
          'content-type': 'application/json',
          ...headers,
        },
        body: JSON.stringify({ model: 'gpt-4o', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }),
      });
    const seen = async (res: Response) => ({
      status: res.status,
      code: ((await res.json()) as { error?: { code?: string } }).error?.code,
      limit: res.headers.get('ratelimit-limit'),
      remaining: res.headers.get('ratelimit-remaining'),
      reset: res.headers.get('ratelimit-reset'),
    });
    const answers = [
      await seen(await post('nope')), // 404 unknown_provider
      await seen(await post('openai', { 'x-metering-tags': 'bad key=x' })), // 400 invalid_tags
      await seen(await post()), // admitted: 1 of the quota of 3
      await seen(await post()), // 402: the first call's cost passed the budget
      await seen(await post()),
    ];
    expect(answers.map((a) => [a.status, a.code ?? 'ok', a.limit, a.remaining])).toEqual([
      [404, 'unknown_provider', '10', '10'],
      [400, 'invalid_tags', '10', '10'],
      [200, 'ok', '10', '9'],
      [402, 'budget_exceeded', '10', '9'],
      [402, 'budget_exceeded', '10', '9'],
    ]);
    for (const a of answers) expect(Number(a.reset)).toBeGreaterThan(0);

    // A higher budget: the 402s counted toward nothing, so two more calls fit the quota of 3 —
    // and not one more, however soon they follow each other (each admitted call counts here
    // until the re-read count shows it).
    await setBudget(db, 'edges', '100', true);
    await eventually(async () => (await post()).status === 200, 5_000, 'the new budget admits calls');
    const after = [await seen(await post()), await seen(await post()), await seen(await post())];
    expect(after.map((a) => [a.status, a.code ?? 'ok', a.remaining])).toEqual([
      [200, 'ok', '7'],
      [429, 'quota_exceeded', '7'], // no slot taken by a quota refusal either
      [429, 'quota_exceeded', '7'],
    ]);
    expect(upstream.requests).toHaveLength(3);
  });
});
