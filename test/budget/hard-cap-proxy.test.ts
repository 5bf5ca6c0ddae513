import OpenAI from 'openai';
import { describe, expect, it, vi } from 'vitest';
import { setBudget } from '../../src/budget/admin.js';
import { formatUnits, toUnits } from '../../src/money.js';
import { BudgetMonitor } from '../../src/budget/monitor.js';
import { eventually, openaiVia, startFleet } from '../helpers/fleet.js';
import { postgresUrl } from '../helpers/stores.js';

// gpt-4o: $2.50 / MTok input, $10 / MTok output. Each call really uses 100 + 400 tokens:
// 100 × 2.5e-6 + 400 × 1e-5 = $0.00425. Its worst case (max_tokens 500, input ≤ body/3 tokens)
// is a little over 500 × 1e-5 = $0.005.
const ACTUAL = '0.00425';
const BUDGET = '0.1';
const WORKERS = 4;

const call = (client: OpenAI) =>
  client.chat.completions.create({ model: 'gpt-4o', max_tokens: 500, messages: [{ role: 'user', content: 'hello' }] });

interface Admitted {
  sidecar: number;
  sent: number;
  id: string;
}

describe.skipIf(!postgresUrl)('the Pro hard cap on two sidecars', () => {
  it("concurrent calls pass the budget by at most README's bound: the crossing call plus what the other sidecar had not yet shown", async () => {
    // When each sidecar's spend re-reads began and ended (both daemons run in this process).
    const rereads: { monitor: BudgetMonitor; began: number; ended: number }[] = [];
    const refresh = BudgetMonitor.prototype.refresh;
    const spy = vi.spyOn(BudgetMonitor.prototype, 'refresh').mockImplementation(async function (this: BudgetMonitor) {
      const began = Date.now();
      const fired = await refresh.call(this);
      rereads.push({ monitor: this, began, ended: Date.now() });
      return fired;
    });
    const { db, key, upstream, daemons } = await startFleet({
      account: 'capped',
      plan: 'pro',
      sidecars: 2,
      usage: { prompt: 100, completion: 400 },
      delayMs: 100,
      setup: (db) => setBudget(db, 'capped', BUDGET, true),
    });
    const clients = daemons.map((d) => openaiVia(d, key));

    // When each event was written, seen from outside (polled).
    const written = new Map<string, number>();
    let polling = true;
    const poller = (async () => {
      while (polling) {
        const rows = await db.query<{ id: string }>('SELECT event_id::text AS id FROM usage_events');
        const now = Date.now();
        for (const r of rows) if (!written.has(r.id)) written.set(r.id, now);
        await new Promise((res) => setTimeout(res, 20));
      }
    })();

    // Each sidecar gets WORKERS clients calling back to back until they are refused.
    const admitted: Admitted[] = [];
    let refusal: InstanceType<typeof OpenAI.APIError> | undefined;
    await Promise.all(
      clients.flatMap((client, sidecar) =>
        Array.from({ length: WORKERS }, async () => {
          for (;;) {
            const sent = Date.now();
            try {
              const { response } = await call(client).withResponse();
              admitted.push({ sidecar, sent, id: response.headers.get('x-meter-request-id')! });
            } catch (err) {
              refusal ??= err as InstanceType<typeof OpenAI.APIError>;
              return;
            }
          }
        }),
      ),
    );
    expect(refusal).toBeInstanceOf(OpenAI.APIError);
    expect(refusal!.status).toBe(402);
    expect(refusal!.code).toBe('budget_exceeded');
    expect(upstream.requests).toHaveLength(admitted.length);

    // Every admitted call is metered.
    await eventually(
      async () => {
        const [row] = await db.query<{ n: string }>(`SELECT count(*) AS n FROM usage_events`);
        return Number(row!.n) === admitted.length;
      },
      5_000,
      'all events written',
    );
    await eventually(async () => admitted.every((c) => written.has(c.id)), 5_000, 'every write seen by the poller');
    polling = false;
    await poller;
    const [row] = await db.query<{ spend: string }>(`SELECT coalesce(sum(spend), 0)::text AS spend FROM usage_daily`);
    const spend = toUnits(row!.spend);
    expect(spend).toBe(toUnits(ACTUAL) * BigInt(admitted.length));
    expect(spend).toBeGreaterThanOrEqual(toUnits(BUDGET)); // the budget was usable to the end

    spy.mockRestore();

    // The bound: the last call admitted anywhere was admitted while its sidecar's committed
    // spend (re-read spend + its own unseen costs + its calls in flight) was below the budget;
    // past it go only that call and the other sidecar's calls it could not see yet: those
    // written after the re-read in force then began. Which sidecar admitted last is not known
    // from outside, so the larger of the two bounds is taken; its last admission is taken at
    // its last call's send time, the re-read in force as the older of the two sidecars' and
    // event times as polled: each only widens the set.
    const reread = (at: number) =>
      Math.min(
        ...[...new Set(rereads.map((r) => r.monitor))].map((m) =>
          Math.max(...rereads.filter((r) => r.monitor === m && r.ended <= at).map((r) => r.began)),
        ),
      );
    const unseenBy = (sidecar: number) => {
      const lastSent = Math.max(...admitted.filter((c) => c.sidecar === sidecar).map((c) => c.sent));
      const since = reread(lastSent);
      return {
        n: admitted.filter((c) => c.sidecar !== sidecar && written.get(c.id)! > since).length,
        ago: lastSent - since,
      };
    };
    const [a, b] = [unseenBy(0), unseenBy(1)];
    const worst = a.n >= b.n ? a : b;
    const unseen = worst.n;
    const bound = toUnits(BUDGET) + toUnits(ACTUAL) * BigInt(1 + unseen);
    const overshoot = spend - toUnits(BUDGET);
    console.info(
      `hard cap, 2 sidecars × ${WORKERS} workers: ${admitted.length} calls, overshoot $${formatUnits(overshoot)} ` +
        `(${Number((overshoot * 10_000n) / toUnits(BUDGET)) / 100}% of the budget); bound $${formatUnits(bound - toUnits(BUDGET))} (1 + ${unseen} calls; re-read in force began ${worst.ago} ms before)`,
    );
    expect(spend).toBeLessThanOrEqual(bound);
    // The 100% alert fires.
    await eventually(
      async () => (await db.query(`SELECT 1 FROM alert_levels_fired WHERE level = 100`)).length === 1,
      5_000,
      '100% level fired',
    );
  });

  it('reserves a body too large to read whole at a token a byte plus the model window, so nothing else fits beside it', async () => {
    // 5 MiB of body at a token a byte is $13.11 of gpt-4o input; with a $13 budget the big call
    // is admitted (nothing spent) and, while it runs, holds the rest: a small call gets 402.
    const {
      key,
      upstream,
      daemons: [daemon],
    } = await startFleet({
      account: 'big',
      plan: 'pro',
      sidecars: 1,
      usage: { prompt: 100, completion: 400 },
      delayMs: 600,
      setup: (db) => setBudget(db, 'big', '13', true),
    });
    const client = openaiVia(daemon!, key);
    const huge = 'x'.repeat(5 * 1024 * 1024);
    const big = client.chat.completions.create({
      model: 'gpt-4o',
      max_tokens: 10,
      messages: [{ role: 'user', content: huge }],
    });
    await eventually(async () => upstream.requests.length === 1, 10_000, 'the big call reached the provider');
    const err = await call(client).then(
      () => undefined,
      (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
    );
    expect(err?.status).toBe(402);
    await big; // it ends costing $0.00425: the reservation is released
    await expect(call(client)).resolves.toMatchObject({ usage: { prompt_tokens: 100 } });
    expect(upstream.requests).toHaveLength(2);
  });
});
