import { connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import { setBudget } from '../../src/budget/admin.js';
import { EXPORTS_PER_ACCOUNT } from '../../src/export/http.js';
import type { Db } from '../../src/store/types.js';
import { eventually, openaiVia, startFleet } from '../helpers/fleet.js';
import { postgresUrl } from '../helpers/stores.js';

/**
 * One account holds 50 exports whose client never reads the body; another account's proxied
 * calls (under a hard cap, so every call is an admission against its budget), analytics and
 * /readyz are served meanwhile. The latencies are printed for docs/security.md; the bounds
 * asserted are generous (a starved pool answers 500 after 5 s, or 402 "cannot confirm room").
 */
const SLOW_EXPORTS = 50;
const EVENTS = 60_000;

/** Enough rows that no export fits in the sockets' buffers: each one waits on its reader. */
async function seed(db: Db, accountId: string): Promise<void> {
  await db.query(
    `INSERT INTO usage_events (time, event_id, account_id, key_id, provider, model, requested_model, status,
       input_tokens, output_tokens, cached_input_tokens, cost, price_version, usage_source, latency_ms, stream, tags)
     SELECT date_trunc('month', now()) + (i * interval '1 second'), gen_random_uuid(), $1, 'key' || (i % 7),
       'openai', 'gpt-4o-mini', 'gpt-4o-mini', 200, 1000 + i, 200, 0, 0.0001, 'genai-prices@0.1.8', 'provider',
       120.5, false, jsonb_build_object('team', 'team-' || (i % 13), 'user', 'user-' || i)
     FROM generate_series(1, $2::int) AS i`,
    [accountId, EVENTS],
  );
}

interface Held {
  socket: Socket;
  /** The status line of the answer, once its first bytes came. */
  status?: string;
}

/** A GET whose response is never read past its first chunk: the socket is paused then. */
function holdExport(url: string, key: string): Promise<Held> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const held: Held = { socket: connect(Number(port), hostname) };
    held.socket.once('data', (chunk: Buffer) => {
      held.socket.pause();
      held.status = chunk.toString('latin1').split('\r\n')[0];
    });
    held.socket.once('connect', () => {
      held.socket.write(
        `GET /analytics/export?format=csv HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n\r\n`,
        () => resolve(held),
      );
    });
    held.socket.once('error', reject);
  });
}

const timed = async <T>(fn: () => Promise<T>): Promise<[T, number]> => {
  const t0 = performance.now();
  const value = await fn();
  return [value, performance.now() - t0];
};

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const p95 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.ceil(xs.length * 0.95) - 1]!;

describe.skipIf(!postgresUrl)('a tenant holding slow exports', () => {
  it('costs only its own requests: another account is served as before', { timeout: 120_000 }, async () => {
    let victimKey = '';
    let hostileId = '';
    const { key: hostileKey, daemons } = await startFleet({
      account: 'hostile',
      plan: 'pro',
      sidecars: 1,
      setup: async (db) => {
        await createAccount(db, 'victim', 'pro');
        victimKey = (await createKey(db, 'victim')).key;
        await setBudget(db, 'victim', '1000', true);
        const [row] = await db.query<{ id: string }>("SELECT id FROM accounts WHERE name = 'hostile'");
        hostileId = row!.id;
        await seed(db, hostileId);
      },
    });
    const daemon = daemons[0]!;
    const client = openaiVia(daemon, victimKey);
    const auth = { authorization: `Bearer ${victimKey}` };

    /** One round of the victim's work: a proxied call under the hard cap, two analytics reads, /readyz. */
    async function round(): Promise<Record<string, [number, number]>> {
      const [chat, chatMs] = await timed(() =>
        client.chat.completions.create({
          model: 'gpt-4o',
          max_tokens: 50,
          messages: [{ role: 'user', content: 'hi' }],
        }),
      );
      expect(chat.usage?.prompt_tokens).toBe(10);
      const get = async (path: string) => {
        const [res, ms] = await timed(() => fetch(`${daemon.url}${path}`, { headers: auth }));
        await res.arrayBuffer();
        return [res.status, ms] as [number, number];
      };
      return {
        proxy: [200, chatMs],
        summary: await get('/analytics/summary'),
        events: await get('/analytics/events?limit=100'),
        readyz: await get('/readyz'),
      };
    }

    async function measure(rounds: number) {
      const ms: Record<string, number[]> = {};
      for (let i = 0; i < rounds; i++) {
        for (const [what, [status, t]] of Object.entries(await round())) {
          expect(status, `${what} while the other account holds exports`).toBe(200);
          (ms[what] ??= []).push(t);
        }
      }
      return Object.fromEntries(Object.entries(ms).map(([k, v]) => [k, { median: median(v), p95: p95(v) }]));
    }

    await measure(2); // warm up: key cache, plans, budgets read
    const before = await measure(10);

    const held = await Promise.all(Array.from({ length: SLOW_EXPORTS }, () => holdExport(daemon.url, hostileKey)));
    // Give the exports time to fill their sockets and wait on their readers.
    await new Promise((r) => setTimeout(r, 1_500));
    const during = await measure(10);

    // Each was answered: two ran (and wait on their readers), the rest were refused at once.
    await eventually(async () => held.every((h) => h.status !== undefined), 10_000, 'every export answered');
    const statuses = held.map((h) => h.status);
    expect(statuses.filter((s) => s === 'HTTP/1.1 200 OK')).toHaveLength(EXPORTS_PER_ACCOUNT);
    expect(statuses.filter((s) => s === 'HTTP/1.1 429 Too Many Requests')).toHaveLength(
      SLOW_EXPORTS - EXPORTS_PER_ACCOUNT,
    );
    for (const h of held) h.socket.destroy();

    console.log(JSON.stringify({ slowExports: SLOW_EXPORTS, before, during }, null, 1));
    for (const what of Object.keys(before)) expect(during[what]!.p95, what).toBeLessThan(2_000);
  });
});
