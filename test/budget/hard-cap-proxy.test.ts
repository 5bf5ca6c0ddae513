import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { setBudget } from '../../src/budget/admin.js';
import { toUnits } from '../../src/budget/money.js';
import { eventually, openaiVia, startFleet } from '../helpers/fleet.js';
import { postgresUrl } from '../helpers/stores.js';

// gpt-4o: $2.50 / MTok input, $10 / MTok output. Each call really uses 100 + 400 tokens:
// 100 × 2.5e-6 + 400 × 1e-5 = $0.00425. Its worst case (max_tokens 500, input ≤ body/3 tokens)
// is a little over 500 × 1e-5 = $0.005.
const ACTUAL = '0.00425';
const BUDGET = '0.05';

const call = (client: OpenAI) =>
  client.chat.completions.create({ model: 'gpt-4o', max_tokens: 500, messages: [{ role: 'user', content: 'hello' }] });

describe.skipIf(!postgresUrl)('the Pro hard cap through the proxy', () => {
  it('holds under concurrency across two sidecars: 402 budget_exceeded, the provider is not called, the overshoot stays within the in-flight reservations', async () => {
    const { db, key, upstream, daemons } = await startFleet({
      account: 'capped', plan: 'pro', sidecars: 2, usage: { prompt: 100, completion: 400 }, delayMs: 150,
      setup: (db) => setBudget(db, 'capped', BUDGET, true),
    });
    const clients = daemons.map((d) => openaiVia(d, key));

    // Waves of 8 concurrent calls per sidecar until everything is refused.
    let admitted = 0;
    let refused = 0;
    let firstRefusal: InstanceType<typeof OpenAI.APIError> | undefined;
    for (let wave = 0; wave < 12 && refused < 16; wave++) {
      const results = await Promise.allSettled(clients.flatMap((c) => Array.from({ length: 8 }, () => call(c))));
      refused = 0;
      for (const r of results) {
        if (r.status === 'fulfilled') admitted++;
        else {
          refused++;
          firstRefusal ??= r.reason as InstanceType<typeof OpenAI.APIError>;
        }
      }
    }
    expect(admitted).toBeGreaterThanOrEqual(Number(toUnits(BUDGET) / toUnits(ACTUAL))); // the budget was usable
    expect(refused).toBe(16); // in the end every call is refused
    expect(firstRefusal).toBeInstanceOf(OpenAI.APIError);
    expect(firstRefusal!.status).toBe(402);
    expect(firstRefusal!.code).toBe('budget_exceeded');
    expect(firstRefusal!.message).toContain('monthly budget of $0.05 for account capped is reached');
    expect(upstream.requests).toHaveLength(admitted);

    // Every admitted call is metered; spend may pass the budget only by calls admitted below it.
    await eventually(async () => {
      const [row] = await db.query<{ n: string }>(`SELECT count(*) AS n FROM usage_events`);
      return Number(row!.n) === admitted;
    }, 5_000, 'all events written');
    const [row] = await db.query<{ spend: string }>(`SELECT coalesce(sum(spend), 0)::text AS spend FROM usage_daily`);
    const spend = toUnits(row!.spend);
    expect(spend).toBe(toUnits(ACTUAL) * BigInt(admitted));
    expect(spend).toBeGreaterThanOrEqual(toUnits(BUDGET)); // it did use the budget up
    // Overshoot bound: each sidecar can admit one wave (8 calls) the other does not yet see.
    const bound = toUnits(BUDGET) + 2n * 8n * toUnits(ACTUAL);
    expect(spend).toBeLessThanOrEqual(bound);

    // The 100% alert still fires.
    await eventually(async () => (await db.query(`SELECT 1 FROM alert_levels_fired WHERE level = 100`)).length === 1, 5_000, '100% level fired');
  });
});
