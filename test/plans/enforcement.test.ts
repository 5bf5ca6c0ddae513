import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { setAccountPlan } from '../../src/auth/accounts.js';
import { eventually, openaiVia, sleep, startFleet } from '../helpers/fleet.js';
import { postgresUrl } from '../helpers/stores.js';

const ask = (client: OpenAI) => client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }).withResponse();

async function refusal(client: OpenAI) {
  const err = await ask(client).then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(OpenAI.APIError);
  return err as InstanceType<typeof OpenAI.APIError>;
}

describe.skipIf(!postgresUrl)('plan limits on two sidecars sharing PostgreSQL', () => {
  it('the monthly quota is fleet-wide, answers 429 quota_exceeded with Retry-After, and an upgrade frees calls at once', async () => {
    const { db, key, upstream, daemons: [a, b] } = await startFleet({
      account: 'quota-acct', plan: 'free', sidecars: 2,
      setup: (db) => db.query(`UPDATE plans SET monthly_call_quota = 6 WHERE name = 'free'`),
    });
    const viaA = openaiVia(a!, key);
    const viaB = openaiVia(b!, key);

    for (let i = 0; i < 3; i++) {
      const { response } = await ask(viaA);
      expect(response.headers.get('ratelimit-limit')).toBe('60');
      await ask(viaB);
    }
    // Each sidecar admitted 3 itself; within a flush interval or two it sees the other's 3.
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
    const ms = await eventually(async () => {
      const results = await Promise.allSettled([ask(viaA), ask(viaB)]);
      return results.every((r) => r.status === 'fulfilled');
    }, 5_000, 'upgrade frees calls on both sidecars');
    expect(ms).toBeLessThan(5_000);
  });

  it('the per-key rate limit answers 429 rate_limited with RateLimit headers on every response', async () => {
    const { key, upstream, daemons: [daemon] } = await startFleet({
      account: 'rate-acct', plan: 'pro', sidecars: 1,
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
});
