import { describe, expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import { MAX_COUNT } from '../../src/providers/common.js';
import { eventually, startFullDaemon } from '../helpers/fleet.js';
import { createTestDatabase } from '../helpers/stores.js';
import { startFakeUpstream } from '../helpers/upstreams.js';

/**
 * A hostile or broken provider reports absurd usage: 1e300 tokens (once dead-lettered as
 * invalid bigint syntax: the call missing from spend, budgets and the cap) and 2^63-1024
 * tokens (once charged $1.35 billion and overflowed the day's rollup, after which every normal
 * event of that account, day and model was dead-lettered). Each call must be metered, clamped
 * and flagged with its raw figures, and the normal calls around it must still be written.
 */

const HUGE = [1e300, 2 ** 63 - 1024];

describe('absurd usage from a provider', () => {
  it.each([
    ['PostgreSQL', true],
    ['the embedded store', false],
  ])(
    '%s: every call is metered; the absurd ones clamped and flagged; the day stays writable',
    { timeout: 120_000 },
    async (_name, postgres) => {
      const upstream = await startFakeUpstream();
      let prompt: number = 100;
      upstream.respond((_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        // Written by hand: JSON.stringify would write 2^63-1024 as 9223372036854775000.
        res.end(
          `{"id":"c","object":"chat.completion","model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":${prompt === 2 ** 63 - 1024 ? '9223372036854774784' : String(prompt)},"completion_tokens":10,"total_tokens":1}}`,
        );
      });
      const daemon = await startFullDaemon(postgres ? await createTestDatabase() : undefined, upstream);
      await createAccount(daemon.store, 'huge', 'pro');
      const { key } = await createKey(daemon.store, 'huge', 'k');
      const call = async (tokens: number) => {
        prompt = tokens;
        const res = await fetch(`${daemon.url}/proxy/openai/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-metering-tags': 'team=a' },
          body: '{"model":"gpt-4o","messages":[]}',
        });
        expect(res.status).toBe(200);
        await res.text();
      };
      await call(100);
      for (const n of HUGE) {
        await call(n);
        await call(100); // a normal call of the same account, day and model after it
      }
      await eventually(
        async () =>
          Number((await daemon.store.query<{ n: string }>('SELECT count(*) AS n FROM usage_events'))[0]!.n) === 5,
        20_000,
        'all five calls written',
      );
      const events = await daemon.store.query<{
        input_tokens: string;
        usage_source: string;
        usage_raw: unknown;
        cost: string;
      }>('SELECT input_tokens::text, usage_source, usage_raw, cost::text FROM usage_events ORDER BY time');
      expect(events.map((e) => Number(e.input_tokens))).toEqual([100, MAX_COUNT, 100, MAX_COUNT, 100]);
      expect(events.map((e) => e.usage_source)).toEqual(Array(5).fill('provider'));
      expect(events[0]!.usage_raw).toBeNull();
      expect(events[1]!.usage_raw).toEqual({ clamped: ['inputTokens'], figures: { 'usage.prompt_tokens': '1e+300' } });
      expect(events[3]!.usage_raw).toMatchObject({ clamped: ['inputTokens'] });
      expect(Object.values((events[3]!.usage_raw as { figures: Record<string, string> }).figures)[0]).toMatch(
        /^92233720368547\d+$/,
      );
      // The rollups hold every call, and their sums are exact.
      const [day] = await daemon.store.query<{ requests: string; input_tokens: string; spend: string }>(
        `SELECT requests::text, input_tokens::text, spend::text FROM usage_daily`,
      );
      expect(Number(day!.requests)).toBe(5);
      expect(day!.input_tokens).toBe(String(2 * MAX_COUNT + 300));
      const total = await daemon.store.query<{ s: string }>('SELECT sum(cost)::text AS s FROM usage_events');
      expect(Number(day!.spend)).toBe(Number(total[0]!.s));
      const [tag] = await daemon.store.query<{ requests: string }>(`SELECT requests::text FROM usage_tag_daily`);
      expect(Number(tag!.requests)).toBe(5);
      // Analytics answers for the day.
      const summary = await fetch(`${daemon.url}/analytics/summary`, { headers: { authorization: `Bearer ${key}` } });
      expect(summary.status).toBe(200);
      expect(((await summary.json()) as { requests: number }).requests).toBe(5);
    },
  );

  it(
    'PostgreSQL: a rollup row already near the old limits still takes events (NUMERIC sums)',
    { timeout: 60_000 },
    async () => {
      const upstream = await startFakeUpstream();
      upstream.respond((_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          '{"id":"c","object":"chat.completion","model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":10}}',
        );
      });
      const daemon = await startFullDaemon(await createTestDatabase(), upstream);
      await createAccount(daemon.store, 'near', 'pro');
      const { key } = await createKey(daemon.store, 'near', 'k');
      const call = async () => {
        const res = await fetch(`${daemon.url}/proxy/openai/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: '{"model":"gpt-4o","messages":[]}',
        });
        expect(res.status).toBe(200);
        await res.text();
      };
      await call();
      await eventually(
        async () => (await daemon.store.query('SELECT 1 FROM usage_daily')).length === 1,
        20_000,
        'first event',
      );
      await daemon.store.query(
        `UPDATE usage_daily SET input_tokens = 9223372036854775800, spend = 999999999999.99999999`,
      );
      await call();
      await eventually(
        async () =>
          Number((await daemon.store.query<{ n: string }>('SELECT count(*) AS n FROM usage_events'))[0]!.n) === 2,
        20_000,
        'the second event written',
      );
      const [day] = await daemon.store.query<{ requests: string; input_tokens: string }>(
        'SELECT requests::text, input_tokens::text FROM usage_daily',
      );
      expect(day).toEqual({ requests: '2', input_tokens: '9223372036854775810' });
    },
  );
});
