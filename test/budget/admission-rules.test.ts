/**
 * The two hard-cap rules of CONTRACT §6 through the proxy, with the official SDKs: a block
 * budget admits calls while its spend (plus the calls in flight) is below its amount, whatever
 * one call's worst case; a strict one only when the call's worst case fits, and its 402 says
 * the worst case, the room and that a lower max_tokens fits. Shadow budgets flag exactly what
 * a block budget of the same rule refuses. The number of choices multiplies the worst case; a
 * model without a price is refused by a block budget (402 unpriced_model, in Anthropic's own
 * envelope on /proxy/anthropic) and flagged by a shadow one.
 */
import Anthropic from '@anthropic-ai/sdk';
import { expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import { createBudget } from '../../src/budget/budgets-admin.js';
import { parseScope } from '../../src/budget/scope.js';
import { toUnits } from '../../src/money.js';
import { openPostgres } from '../../src/store/postgres.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { anthropicVia, eventually, openaiVia, startFullDaemon } from '../helpers/fleet.js';
import { describeEachBackend } from '../helpers/stores.js';
import { daemonStore } from './helpers/seed.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstreams.js';

// gpt-4o-mini: $0.15 / MTok in, $0.60 / MTok out. Each call really uses 400 + 500 tokens:
// $0.00006 + $0.0003 = $0.00036. Without max_tokens its worst case is its 128k window of output
// (about $0.077), far above the $0.00162 budgets below (4.5 calls).
const AMOUNT = '0.00162';
const COST = toUnits('0.00036');

function answer(upstream: FakeUpstream): void {
  upstream.respond((_req, res, seen) => {
    const body = JSON.parse(seen.body.toString('utf8')) as { model: string };
    res.writeHead(200, { 'content-type': 'application/json' });
    if (seen.url.includes('/messages')) {
      res.end(
        JSON.stringify({
          id: 'msg_01',
          type: 'message',
          role: 'assistant',
          model: body.model,
          content: [{ type: 'text', text: 'ok' }],
          stop_reason: 'end_turn',
          stop_sequence: null,
          usage: { input_tokens: 400, output_tokens: 500 },
        }),
      );
      return;
    }
    res.end(
      JSON.stringify({
        id: 'chatcmpl-1',
        object: 'chat.completion',
        created: 1763726400,
        model: body.model === 'gpt-4o-mini' ? 'gpt-4o-mini-2024-07-18' : body.model,
        choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 400, completion_tokens: 500, total_tokens: 900 },
      }),
    );
  });
}

async function outcome(call: () => Promise<unknown>): Promise<string> {
  try {
    await call();
    return 'ok';
  } catch (err) {
    const e = err as { status?: number; message?: string; error?: unknown };
    return `${e.status}: ${e.message}`;
  }
}

describeEachBackend('the hard cap and strict budgets', (backend) => {
  it('a small cap admits until its amount is spent; a strict one only what fits; shadows flag the same', async () => {
    const upstream = await startFakeUpstream();
    answer(upstream);
    const { setup, databaseUrl, dataDir } = await daemonStore(backend);
    await createAccount(setup, 'acme', 'pro');
    const { key } = await createKey(setup, 'acme');
    const make = (tenant: string, action: 'block' | 'shadow', strict: boolean) =>
      createBudget(setup, 'acme', { scope: parseScope(`tag:tenant=${tenant}`), amount: AMOUNT, action, strict });
    const loose = await make('loose', 'block', false);
    const strict = await make('strict', 'block', true);
    const shadowLoose = await make('shadow-loose', 'shadow', false);
    const shadowStrict = await make('shadow-strict', 'shadow', true);
    const unpriced = await createBudget(setup, 'acme', {
      scope: parseScope('tag:tenant=unpriced'),
      amount: '100',
      action: 'block',
    });
    await setup.close();

    const daemon = await startFullDaemon(databaseUrl, upstream, { METER_DATA_DIR: dataDir });
    const db = databaseUrl ? openPostgres(databaseUrl) : daemon.store;
    if (databaseUrl) atFileEnd(() => db.close());
    const client = openaiVia(daemon, key);
    const chat = (tenant: string, extra: Record<string, unknown> = {}) =>
      outcome(() =>
        client.chat.completions.create(
          { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], ...extra },
          { headers: { 'X-Tenant-ID': tenant } },
        ),
      );
    const run = async (tenant: string, n: number, extra: Record<string, unknown> = {}) => {
      const out: string[] = [];
      for (let i = 0; i < n; i++) out.push(await chat(tenant, extra));
      return out;
    };

    // The cap smaller than one call's worst case: calls 1-5 are admitted (after 4, $0.00144 is
    // spent: room is left), the fifth takes spend to $0.0018, and then it refuses.
    const looseRun = await run('loose', 7);
    expect(looseRun.slice(0, 5)).toEqual(['ok', 'ok', 'ok', 'ok', 'ok']);
    expect(looseRun[5]).toMatch(/^402: /);
    expect(looseRun[5]).toContain(`budget ${loose.id} (scope tag:tenant=loose`);
    expect(looseRun[5]).toContain('is reached');

    // Strict: the first call's worst case (its whole output window) does not fit: the 402 says
    // the worst case, the room and that a lower max_tokens fits. With max_tokens 500 (worst case
    // about $0.0003) four calls fit and the fifth's worst case does not; spend never passes.
    const [open] = await run('strict', 1);
    expect(open).toMatch(/^402: /);
    expect(open).toContain(`budget ${strict.id} (scope tag:tenant=strict`);
    expect(open).toContain(`has $${AMOUNT} left, less than this call's worst case of $`);
    expect(open).toContain('a lower max_tokens would fit');
    // n multiplies the worst case: 128 choices of 100 tokens ($0.00768) do not fit.
    const [many] = await run('strict', 1, { max_tokens: 100, n: 128 });
    expect(many).toMatch(/^402: /);
    expect(many).toContain('a lower max_tokens would fit');
    const strictRun = await run('strict', 5, { max_tokens: 500 });
    expect(strictRun.slice(0, 4)).toEqual(['ok', 'ok', 'ok', 'ok']);
    expect(strictRun[4]).toContain("less than this call's worst case");

    // Shadow budgets flag what a block budget of the same rule refuses: the loose one the sixth
    // and seventh calls; the strict one the first (its output window does not fit) and, as that
    // call was not refused here and cost $0.00036, the fifth and sixth (four fitted the block).
    expect(await run('shadow-loose', 7)).toEqual(Array(7).fill('ok'));
    expect(await run('shadow-strict', 1)).toEqual(['ok']);
    expect(await run('shadow-strict', 5, { max_tokens: 500 })).toEqual(Array(5).fill('ok'));

    // A model without a price: refused under a block budget, in the provider's own envelope.
    const nameless = await chat('unpriced', { model: 'gpt-9-turbo-imaginary' });
    expect(nameless).toMatch(/^402: /);
    expect(nameless).toContain('"gpt-9-turbo-imaginary" has no price');
    expect(nameless).toContain('METER_PRICES_FILE');
    const claude: Anthropic = anthropicVia(daemon, key);
    const err = await claude.messages
      .create(
        { model: 'claude-imaginary-9', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] },
        { headers: { 'X-Tenant-ID': 'unpriced' } },
      )
      .then(
        () => undefined,
        (e: unknown) => e as InstanceType<typeof Anthropic.APIError>,
      );
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect(err!.status).toBe(402);
    expect(err!.error).toMatchObject({ type: 'error', error: { type: 'unpriced_model' } });
    expect(err!.message).toContain(`budget ${unpriced.id}`);
    // ... and passed, flagged, under a shadow budget.
    expect(await chat('shadow-loose', { model: 'gpt-9-turbo-imaginary' })).toBe('ok');

    const flagged = async (id: string) =>
      (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM usage_events WHERE would_block ? $1`, [id]))[0]!.n;
    const flags = async () => [await flagged(shadowLoose.id), await flagged(shadowStrict.id)];
    await eventually(
      async () => (await flags()).join() === '3,3',
      10_000,
      'the shadow budgets flagged as many calls as the block budgets refused',
    ).catch(async (e: Error) => {
      throw new Error(`${e.message}: ${(await flags()).join()}`);
    });
    const spend = async (tenant: string) =>
      toUnits(
        (
          await db.query<{ s: string }>(
            `SELECT coalesce(sum(cost), 0)::text AS s FROM usage_events WHERE tags ->> 'tenant' = $1`,
            [tenant],
          )
        )[0]!.s,
      );
    expect(await spend('loose')).toBe(5n * COST); // past the amount by what the fifth call cost
    expect(await spend('strict')).toBe(4n * COST); // never past it
    expect(upstream.requests.filter((r) => r.url.includes('/messages'))).toHaveLength(0);
    const unpricedEvent = await db.query<{ unpriced: boolean }>(
      `SELECT unpriced FROM usage_events WHERE model = 'gpt-9-turbo-imaginary'`,
    );
    expect(unpricedEvent).toEqual([{ unpriced: true }]);
  }, 120_000);
});
