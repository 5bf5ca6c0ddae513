/**
 * Budgets of every scope through the proxy, with the official SDKs against a fake provider:
 * a tag (strict), a key and a model budget that block (each refuses a call once what is spent
 * leaves no room, or, strict, less than its worst case, naming its id, scope and window in the
 * 402), a provider budget in shadow mode (strict; calls go
 * through, flagged on their events, counted in /metrics and analytics), an account budget far
 * from its limit that every call is also subject to, and an alerting budget in a DST zone whose
 * levels fire once each, delivered to a webhook with the budget's fields.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import { addChannel } from '../../src/alerts/channels-admin.js';
import { createBudget } from '../../src/budget/budgets-admin.js';
import { parseScope } from '../../src/budget/scope.js';
import { openEmbedded } from '../../src/store/embedded.js';
import { migrate } from '../../src/store/index.js';
import { openPostgres } from '../../src/store/postgres.js';
import type { Db } from '../../src/store/types.js';
import { httpReceiver, waitFor } from '../alerts/helpers/receivers.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { anthropicVia, answerMessages, openaiVia, startFullDaemon } from '../helpers/fleet.js';
import { scrape } from '../helpers/prom-text.js';
import { createTestDatabase, describeEachBackend, tempDir } from '../helpers/stores.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstreams.js';

// gpt-4o: $2.50 / $10 per MTok; gpt-4o-mini: $0.15 / $0.60. 1,000 + 1,000 tokens a call:
// gpt-4o $0.0125, gpt-4o-mini $0.00075. claude-sonnet-4 (100 + 160 tokens): $0.0027.
const SNAPSHOT: Record<string, string> = { 'gpt-4o': 'gpt-4o-2024-08-06', 'gpt-4o-mini': 'gpt-4o-mini-2024-07-18' };

/** OpenAI answers: the requested model's dated snapshot, 1,000 tokens in and out. */
function answerSnapshots(upstream: FakeUpstream, anthropic: FakeUpstream): void {
  upstream.respond((_req, res, seen) => {
    const model = (JSON.parse(seen.body.toString('utf8')) as { model: string }).model;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id: 'chatcmpl-1',
        object: 'chat.completion',
        created: 1763726400,
        model: SNAPSHOT[model] ?? model,
        choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 1000, completion_tokens: 1000, total_tokens: 2000 },
      }),
    );
  });
  answerMessages(anthropic, { input: 100, output: 160 });
}

type Outcome = 'ok' | string;

async function outcome(call: () => Promise<unknown>): Promise<Outcome> {
  try {
    await call();
    return 'ok';
  } catch (err) {
    const e = err as { status?: number; message?: string };
    return `${e.status}: ${e.message}`;
  }
}

describeEachBackend('budgets of every scope through the proxy', (backend) => {
  it('block per tag, key and model; shadow per provider; alerts per budget and window', async () => {
    const upstream = await startFakeUpstream();
    const anthropicUpstream = await startFakeUpstream();
    answerSnapshots(upstream, anthropicUpstream);
    const rx = await httpReceiver();
    const dataDir = tempDir();
    const databaseUrl = backend.name === 'postgres' ? await createTestDatabase() : undefined;

    const setup: Db = databaseUrl ? openPostgres(databaseUrl) : await openEmbedded(dataDir);
    await migrate(setup);
    await createAccount(setup, 'teams', 'pro');
    const keyA = await createKey(setup, 'teams');
    const keyB = await createKey(setup, 'teams');
    const make = (scope: string, amount: string, action: 'alert' | 'block' | 'shadow', extra = {}) =>
      createBudget(setup, 'teams', { scope: parseScope(scope), amount, action, ...extra });
    const tag = await make('tag:tenant=globex', '0.015', 'block', {
      window: 'day',
      timezone: 'Asia/Kolkata',
      strict: true,
    });
    const key = await make(`key:${keyB.id}`, '0.02', 'block');
    const model = await make('model:gpt-4o-mini', '0.001', 'block', { window: 'week', timezone: 'America/New_York' });
    const provider = await make('provider:anthropic', '0.007', 'shadow', {
      window: 'quarter',
      timezone: 'Asia/Kathmandu',
      strict: true,
    });
    const roomy = await make('account', '100', 'block');
    const alerting = await make('account', '0.02', 'alert', { levels: [10, 50], timezone: 'Australia/Lord_Howe' });
    await addChannel(setup, 'teams', 'webhook', `${rx.url}/hook`, 'whsec_scopes_test');
    await setup.close();

    const daemon = await startFullDaemon(databaseUrl, upstream, {
      METER_DATA_DIR: dataDir,
      METER_UPSTREAM_ANTHROPIC: `${anthropicUpstream.origin}/v1`,
    });
    const db = databaseUrl ? openPostgres(databaseUrl) : daemon.store;
    if (databaseUrl) atFileEnd(() => db.close());

    const a: OpenAI = openaiVia(daemon, keyA.key);
    const b: OpenAI = openaiVia(daemon, keyB.key);
    const chat =
      (client: OpenAI, m: string, headers: Record<string, string> = {}) =>
      () =>
        client.chat.completions.create(
          { model: m, messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 },
          { headers },
        );
    const run = async (call: () => Promise<unknown>, n: number) => {
      const out: Outcome[] = [];
      for (let i = 0; i < n; i++) out.push(await outcome(call));
      return out;
    };

    // Tag: X-Tenant-ID is the tag tenant; another tenant is not subject to it.
    const globex = await run(chat(a, 'gpt-4o', { 'X-Tenant-ID': 'globex' }), 3);
    expect(globex.slice(0, 2)).toEqual(['ok', 'ok']);
    expect(globex[2]).toMatch(/^402: /);
    expect(globex[2]).toContain(`budget ${tag.id} (scope tag:tenant=globex, window day in Asia/Kolkata`);
    expect(await run(chat(a, 'gpt-4o', { 'X-Metering-Tags': 'tenant=initech' }), 1)).toEqual(['ok']);
    // Key: only key B's calls.
    const keyed = await run(chat(b, 'gpt-4o'), 3);
    expect(keyed.slice(0, 2)).toEqual(['ok', 'ok']);
    expect(keyed[2]).toContain(`budget ${key.id} (scope key:${keyB.id}, window month in UTC`);
    // Model: the requested model; the provider reports its dated snapshot, which counts too.
    const mini = await run(chat(a, 'gpt-4o-mini'), 3);
    expect(mini.slice(0, 2)).toEqual(['ok', 'ok']);
    expect(mini[2]).toContain(`budget ${model.id} (scope model:gpt-4o-mini, window week in America/New_York`);
    // Several budgets on one call: key B's tenant-globex call meets the tag budget (at 166%), the
    // key budget (at 125%) and the roomy account budget (far from it): the tightest refuses.
    const several = await run(chat(b, 'gpt-4o', { 'X-Tenant-ID': 'globex' }), 1);
    expect(several[0]).toMatch(/^402: /);
    expect(several[0]).toContain(`budget ${tag.id} (scope tag:tenant=globex`);

    // Shadow (strict): every call goes through; from the third on, each is a would-be refusal
    // (what is spent leaves less than its worst case: 200 output tokens, $0.0031 with its input).
    const claude: Anthropic = anthropicVia(daemon, keyA.key);
    const shadowed = await run(
      () =>
        claude.messages.create({
          model: 'claude-sonnet-4-20250514',
          max_tokens: 200,
          messages: [{ role: 'user', content: 'hi' }],
        }),
      4,
    );
    expect(shadowed).toEqual(['ok', 'ok', 'ok', 'ok']);
    expect(anthropicUpstream.requests).toHaveLength(4);
    expect(upstream.requests).toHaveLength(2 + 1 + 2 + 2);

    await waitFor(
      async () => {
        const [r] = await db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM usage_events WHERE would_block ? $1`,
          [provider.id],
        );
        return r!.n === 2;
      },
      10_000,
      'two events flagged as would-be refusals of the shadow budget',
    );
    const listed = (await (
      await fetch(`${daemon.url}/analytics/events?provider=anthropic`, {
        headers: { authorization: `Bearer ${keyA.key}` },
      })
    ).json()) as { events: { would_block?: string[] }[] };
    expect(listed.events.map((e) => e.would_block ?? null)).toEqual([[provider.id], [provider.id], null, null]);
    const metrics = await scrape(daemon.metricsUrl);
    expect(metrics.value('meter_budget_refusals_total', { budget_id: provider.id, action: 'shadow' })).toBe(2);
    expect(metrics.value('meter_budget_refusals_total', { budget_id: tag.id, action: 'block' })).toBe(2);
    expect(metrics.text).not.toContain('globex');

    // Analytics: every budget with its state; spend exact.
    let view: { budgets: Record<string, unknown>[] } = { budgets: [] };
    await waitFor(
      async () => {
        const res = await fetch(`${daemon.url}/analytics/budgets`, {
          headers: { authorization: `Bearer ${keyA.key}` },
        });
        view = (await res.json()) as typeof view;
        const byId = new Map(view.budgets.map((x) => [x.id, x]));
        return (
          byId.get(provider.id)?.shadow_refusals === 2 && byId.get(alerting.id)?.levels_fired?.toString() === '10,50'
        );
      },
      10_000,
      'analytics showing the shadow refusals and the fired levels',
    );
    const byId = new Map(view.budgets.map((x) => [x.id, x]));
    expect(byId.get(tag.id)).toMatchObject({
      state: 'blocked',
      spend: 0.025,
      action: 'block',
      timezone: 'Asia/Kolkata',
    });
    expect(String(byId.get(tag.id)!.window_start)).toMatch(/T00:00:00\+05:30$/);
    expect(byId.get(key.id)).toMatchObject({ state: 'blocked', spend: 0.025 });
    expect(byId.get(model.id)).toMatchObject({ state: 'blocked', spend: 0.0015 });
    expect(byId.get(provider.id)).toMatchObject({ state: 'would_block', spend: 0.0108, action: 'shadow' });
    expect(byId.get(roomy.id)).toMatchObject({ state: 'ok', spend: 0.0748 });
    expect(byId.get(alerting.id)).toMatchObject({ state: 'alerting', levels: [10, 50], levels_fired: [10, 50] });

    // Each level once, with the budget's fields (CONTRACT §6). The blocking budgets alert too.
    const bodies = () => rx.received.map((r) => JSON.parse(r.body) as Record<string, unknown>);
    const mine = () => bodies().filter((x) => x.budget_id === alerting.id);
    await waitFor(() => mine().length >= 2, 15_000, 'two alerts of the alerting budget delivered');
    expect(
      mine()
        .map((x) => x.level)
        .sort(),
    ).toEqual([10, 50]);
    expect(mine()[0]).toMatchObject({
      type: 'budget.threshold',
      account: 'teams',
      scope: { kind: 'account', key: null, value: null },
      window: 'month',
      timezone: 'Australia/Lord_Howe',
      budget: 0.02,
    });
    expect(String(mine()[0]!.window_start)).toMatch(/T00:00:00\+1[01]:[03]0$/);
    const pairs = () => bodies().map((x) => `${String(x.budget_id)}@${String(x.level)}`);
    await waitFor(() => pairs().includes(`${tag.id}@100`), 15_000, "the tag budget's 100% alert delivered");
    expect(new Set(pairs()).size).toBe(pairs().length);
  }, 120_000);
});
