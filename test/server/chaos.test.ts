import pino from 'pino';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey, revokeKey } from '../../src/auth/keys.js';
import { setBudget } from '../../src/budget/admin.js';
import { loadConfig } from '../../src/config.js';
import { composeDaemon } from '../../src/server/components.js';
import { startDaemon, type Daemon } from '../../src/server/daemon.js';
import { migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import type { Db } from '../../src/store/types.js';
import type { EventWriter } from '../../src/store/writer.js';
import type { BudgetMonitor } from '../../src/budget/monitor.js';
import { toUnits } from '../../src/money.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { answerChat, eventually } from '../helpers/fleet.js';
import { createTestDatabase, postgresUrl, tempDir } from '../helpers/stores.js';
import { cutAfterCommit, cutConnects, cutReplyTo, startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { startFakeUpstream } from '../helpers/upstreams.js';

/**
 * Chaos under load: the full daemon on real PostgreSQL behind a relay that cuts connections at
 * chosen moments of the protocol (mid-statement, after COMMIT before its reply, during connect,
 * every query for a while, the server gone). The daemon must stay up, answer every call 200,
 * and in the end the database holds exactly the answered events, rollups equal to the raw sums.
 */
// The event batch is a named statement: its text goes once per connection (Parse), its name
// with every run (Parse and Bind). A marker on the text alone misses every batch but a new
// connection's first, and the cuts come only when the pool happens to reconnect.
const BATCH = 'meter_insert_events_postgres';

describe.skipIf(!postgresUrl)('chaos: the database fails under load, the daemon does not', { timeout: 90_000 }, () => {
  let direct: Db;
  let relay: TcpProxy;
  let daemon: Daemon;
  let writer!: EventWriter;
  let budget!: BudgetMonitor;
  let accountId: string;
  let key: string;
  let spareKey: string;
  const logs: { msg?: string; level: number }[] = [];
  const answered: string[] = [];
  const agent = new Agent({ connections: 8 });

  beforeAll(async () => {
    const url = await createTestDatabase();
    direct = openPostgres(url);
    atFileEnd(() => direct.close());
    await migrate(direct);
    await createAccount(direct, 'chaos', 'pro');
    [{ id: accountId }] = (await direct.query<{ id: string }>(
      `SELECT id::text AS id FROM accounts WHERE name = 'chaos'`,
    )) as [{ id: string }];
    key = (await createKey(direct, 'chaos')).key;
    spareKey = (await createKey(direct, 'chaos', 'spare')).key;
    await setBudget(direct, 'chaos', '1000', false); // the budget monitor has an account to watch
    relay = await startTcpProxy(url);
    atFileEnd(() => relay.close());
    const upstream = await startFakeUpstream();
    atFileEnd(() => upstream.close());
    answerChat(upstream, { prompt: 12, completion: 7 });

    const config = loadConfig({
      METER_PORT: '0',
      METER_DATA_DIR: tempDir(),
      DATABASE_URL: relay.urlFor(url),
      METER_UPSTREAM_OPENAI: `${upstream.origin}/v1`,
      METER_FLUSH_INTERVAL_MS: '50',
      METER_KEY_REFRESH_MS: '200',
    });
    const logger = pino(
      { level: 'info' },
      { write: (s: string) => void logs.push(JSON.parse(s) as { msg?: string; level: number }) },
    );
    // The daemon's own components, its event writer with a small memory cap.
    daemon = await startDaemon(config, logger, async (ctx, start) => {
      const parts = await composeDaemon(ctx, start, { writer: { segmentMaxEvents: 200, maxBackoffMs: 300 } });
      writer = parts.metering.writer;
      budget = parts.budgets;
    });
    atFileEnd(() => daemon.close());
  });
  afterAll(() => agent.close());

  /** n calls at concurrency 8 through the daemon; each must be answered 200. */
  async function load(n: number, apiKey = key): Promise<void> {
    let next = 0;
    const one = async () => {
      while (next < n) {
        next++;
        const res = await request(`${daemon.url}/proxy/openai/v1/chat/completions`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${apiKey}`,
            'x-provider-authorization': 'Bearer sk-test',
            'content-type': 'application/json',
            'x-metering-tags': `phase=p${next % 3}`,
          },
          body: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
          dispatcher: agent,
        });
        await res.body.arrayBuffer();
        expect(res.statusCode).toBe(200);
        answered.push(res.headers['x-meter-request-id'] as string);
      }
    };
    await Promise.all(Array.from({ length: 8 }, one));
  }

  const written = async () => (await direct.query<{ n: number }>('SELECT count(*)::int AS n FROM usage_events'))[0]!.n;

  it("cut as the batch's reply comes back (it ran in its transaction, never committed): retried, each event once", async () => {
    await load(40);
    await writer.drain();
    const cuts = relay.cuts;
    relay.tap(cutReplyTo(BATCH, 3));
    await load(120);
    await eventually(async () => relay.cuts >= cuts + 3 || (await written()) === answered.length, 20_000, 'the cuts');
    relay.tap(undefined);
    await writer.drain();
    expect(relay.cuts).toBeGreaterThan(cuts);
    expect(writer.stats().failedAttempts).toBeGreaterThan(0);
  });

  it('cut after COMMIT, before its acknowledgement: the retried batch writes nothing twice', async () => {
    const cuts = relay.cuts;
    relay.tap(cutAfterCommit(BATCH, 3));
    await load(120);
    await eventually(async () => relay.cuts >= cuts + 1, 20_000, 'a cut after COMMIT');
    relay.tap(undefined);
    await writer.drain();
    expect(await written()).toBe(answered.length);
  });

  it('cuts during connect, and every statement of every loop (writer, keys, quota, budget, outbox) cut for a while', async () => {
    relay.tap(cutReplyTo('SELECT')); // every query's reply, on every connection
    await load(80);
    relay.tap(cutConnects(20)); // the pool reconnects: its next connects die while starting
    await load(80);
    relay.tap(undefined);
    await writer.drain();
    expect(await written()).toBe(answered.length);
  });

  it('the server gone (connections cut, new ones refused): a backlog on disk, bounded memory, then all written', async () => {
    await relay.down();
    const rss0 = process.memoryUsage().rss;
    for (let i = 0; i < 5; i++) await load(100);
    // The spool goes on flushing while the database is gone: the whole backlog waits on disk.
    await eventually(async () => writer.stats().buffered === 0, 10_000, 'the backlog flushed');
    expect(writer.stats().backlog).toBeGreaterThanOrEqual(500);
    // Coarse (the test process holds the clients too): 500 events waiting must not cost memory.
    expect(process.memoryUsage().rss - rss0).toBeLessThan(64 << 20);
    await relay.up();
    await writer.drain(60_000);
  });

  it('afterwards: the events are exactly the answered ids, the rollups equal the raw sums, and every loop still runs', async () => {
    const ids = (await direct.query<{ id: string }>('SELECT event_id::text AS id FROM usage_events')).map((r) => r.id);
    expect(ids.length).toBe(answered.length);
    expect(new Set(ids)).toEqual(new Set(answered));

    const daily =
      await direct.query(`SELECT account_id, day, provider, model, spend::text, requests::int, input_tokens::int, output_tokens::int
      FROM usage_daily ORDER BY 1, 2, 3, 4`);
    const rawDaily =
      await direct.query(`SELECT account_id, (time AT TIME ZONE 'UTC')::date AS day, provider, model, sum(cost)::text AS spend,
      count(*)::int AS requests, sum(input_tokens)::int AS input_tokens, sum(output_tokens)::int AS output_tokens
      FROM usage_events GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4`);
    expect(daily).toEqual(rawDaily);
    const tags = await direct.query(
      `SELECT day, tag_key, tag_value, spend::text, requests::int FROM usage_tag_daily ORDER BY 1, 2, 3`,
    );
    const rawTags =
      await direct.query(`SELECT (time AT TIME ZONE 'UTC')::date AS day, t.key AS tag_key, t.value AS tag_value,
      sum(cost)::text AS spend, count(*)::int AS requests
      FROM usage_events CROSS JOIN LATERAL jsonb_each_text(tags) AS t(key, value) GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`);
    expect(tags).toEqual(rawTags);
    expect(writer.stats().deadLettered).toBe(0);

    // The key cache's refresh loop survived: a revocation reaches the daemon.
    await revokeKey(direct, spareKey);
    await eventually(
      async () => {
        const res = await fetch(`${daemon.url}/proxy/openai/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${spareKey}`, 'content-type': 'application/json' },
          body: '{}',
        });
        await res.arrayBuffer();
        return res.status === 401;
      },
      10_000,
      'the revocation',
    );
    // The budget monitor reads again: the pulse sends it the account, whose spend it then holds.
    const [{ spend }] = (await direct.query<{ spend: string }>(
      'SELECT coalesce(sum(cost), 0)::text AS spend FROM usage_events WHERE account_id = $1',
      [accountId],
    )) as [{ spend: string }];
    await load(1);
    // The account budget's spend as the monitor last read it.
    const budgetSpend = () => {
      const def = budget.book.of(accountId).find((d) => d.accountBudget);
      return def && budget.spendOf(def.id, Date.now());
    };
    const back = await eventually(
      async () => budgetSpend() !== undefined && budgetSpend()! > toUnits(spend),
      20_000,
      'the budget monitor back',
    );
    console.info(`chaos: the budget monitor read again ${back} ms into the check`);
    expect((await fetch(`${daemon.url}/readyz`)).status).toBe(200);
  });

  it('SIGTERM while the database is down: the daemon exits in about a second, the events stay in the spool', async () => {
    await relay.down();
    await load(50);
    await eventually(async () => writer.stats().failures > 0, 10_000, 'a failed write');
    const t0 = Date.now();
    await daemon.close();
    const ms = Date.now() - t0;
    expect(ms).toBeLessThan(4_000); // one last attempt (1 s) and no stop waiting on the database
    const kept = logs.find((l) => String(l.msg).includes('stay in the spool')) as { events?: number } | undefined;
    expect(kept?.events).toBeGreaterThanOrEqual(50);
    await relay.up();
  });
});
