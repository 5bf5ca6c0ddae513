import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import { Pricer } from '../../src/pricing/index.js';
import { migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import type { Db } from '../../src/store/types.js';
import { METER_BIN } from '../helpers/cli.js';
import { spawnDaemon, type RunningDaemon } from '../helpers/daemon.js';
import { createTestDatabase, postgresUrl, tempDir } from '../helpers/stores.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstreams.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { loadFixtures } from '../metering/fixtures.js';

/**
 * The real daemon (`meter start` from the source) as a separate process: SIGTERM writes every
 * event before exit; kill -9 loses nothing that was spooled, and the next start replays it.
 */
const chat = loadFixtures().find((f) => f.slug === 'openai' && f.file === 'chat.json')!;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(!postgresUrl)('the daemon process and its spool', () => {
  let url: string;
  let direct: Db;
  let relay: TcpProxy;
  let upstream: FakeUpstream;
  let key: string;
  const running = new Set<RunningDaemon>();

  beforeAll(async () => {
    url = await createTestDatabase();
    direct = openPostgres(url);
    await migrate(direct);
    await createAccount(direct, 'acme', 'pro');
    key = (await createKey(direct, 'acme', 'durability')).key;
    relay = await startTcpProxy(url);
    upstream = await startFakeUpstream();
    upstream.respond((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(chat.bytes);
    });
  });
  afterAll(async () => {
    for (const d of running) await d.stop('SIGKILL');
    await relay.close();
    await direct.close();
  });

  async function start(dataDir: string, flushMs: number): Promise<RunningDaemon> {
    const d = await spawnDaemon(process.execPath, [METER_BIN, 'start'], {
      METER_PORT: '0',
      METER_HOST: '127.0.0.1',
      METER_DATA_DIR: dataDir,
      DATABASE_URL: relay.urlFor(url),
      METER_UPSTREAM_OPENAI: `${upstream.origin}/v1`,
      METER_FLUSH_INTERVAL_MS: String(flushMs),
      METER_LOG_LEVEL: 'info',
    });
    running.add(d);
    d.child.once('exit', () => running.delete(d));
    return d;
  }

  async function call(d: RunningDaemon): Promise<string> {
    const res = await fetch(`${d.url}/proxy/openai/v1/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        'x-provider-authorization': 'Bearer sk-test',
        'content-type': 'application/json',
        'x-metering-tags': 'team=durability',
      },
      body: JSON.stringify(chat.expected.request.body),
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    return res.headers.get('x-meter-request-id')!;
  }

  async function eventsWithIds(ids: string[]): Promise<{ n: number; distinct: number }> {
    const [row] = await direct.query<{ n: number; distinct: number }>(
      'SELECT count(*)::int AS n, count(DISTINCT event_id)::int AS distinct FROM usage_events WHERE event_id = ANY($1::uuid[])',
      [ids],
    );
    return row!;
  }

  async function waitFor(ids: string[], timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ((await eventsWithIds(ids)).n < ids.length) {
      if (Date.now() > deadline)
        throw new Error(`only ${(await eventsWithIds(ids)).n} of ${ids.length} events written`);
      await sleep(100);
    }
  }

  it('SIGTERM writes every event before exit, with the right tokens and cost', async () => {
    // a flush interval far longer than the test: whatever is written, stop() wrote
    const d = await start(tempDir(), 60_000);
    const ids: string[] = [];
    for (let i = 0; i < 25; i++) ids.push(await call(d));
    expect((await eventsWithIds(ids)).n).toBe(0);
    const t0 = Date.now();
    expect(await d.stop('SIGTERM')).toBe(0);
    expect(Date.now() - t0).toBeLessThan(5_000); // nothing left waiting on a timer
    expect(await eventsWithIds(ids)).toEqual({ n: 25, distinct: 25 });
    const [row] = await direct.query<Record<string, unknown>>(
      `SELECT model, requested_model, input_tokens::int AS input, output_tokens::int AS output, cached_input_tokens::int AS cached,
              cost::text AS cost, usage_source, status, tags FROM usage_events WHERE event_id = $1`,
      [ids[0]],
    );
    const usage = chat.expected.usage as unknown as {
      inputTokens: number;
      outputTokens: number;
      cachedInputTokens: number;
    };
    const priced = new Pricer().cost({
      provider: 'openai',
      model: chat.expected.model!,
      requestedModel: 'gpt-4o',
      usage: { ...usage, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0 },
      time: new Date(),
    });
    expect(row).toEqual({
      model: chat.expected.model,
      requested_model: 'gpt-4o',
      input: usage.inputTokens,
      output: usage.outputTokens,
      cached: usage.cachedInputTokens,
      cost: priced.cost,
      usage_source: 'provider',
      status: 200,
      tags: { team: 'durability' },
    });
    expect(Number(priced.cost)).toBeGreaterThan(0);
  }, 60_000); // a daemon process started from the source; on a CI machine running 4 files at once

  it('kill -9 with the database down: calls kept working, the next start replays the spool, nothing duplicated', async () => {
    const dataDir = tempDir();
    const first = await start(dataDir, 100);
    const before: string[] = [];
    for (let i = 0; i < 10; i++) before.push(await call(first));
    await waitFor(before);

    await relay.down();
    const during: string[] = [];
    for (let i = 0; i < 40; i++) during.push(await call(first)); // the database is not on the call path
    await sleep(500); // a few flush intervals: spooled and fsynced
    expect((await eventsWithIds(during)).n).toBe(0);
    expect(await first.stop('SIGKILL')).toBe(null);

    await relay.up();
    const second = await start(dataDir, 100);
    await waitFor(during);
    const all = [...before, ...during];
    expect(await eventsWithIds(all)).toEqual({ n: 50, distinct: 50 });
    const { total } = (
      await direct.query<{ total: number }>(
        "SELECT count(*)::int AS total FROM usage_events WHERE tags->>'team' = 'durability'",
      )
    )[0]!;
    expect(total).toBe(25 + 50);
    expect(second.stderr()).toMatch(/replaying usage events spooled by a previous run/);
    expect(await second.stop('SIGTERM')).toBe(0);
    // the rollups count each event once
    const { requests } = (
      await direct.query<{ requests: number }>(
        "SELECT sum(requests)::int AS requests FROM usage_tag_daily WHERE tag_key = 'team' AND tag_value = 'durability'",
      )
    )[0]!;
    expect(requests).toBe(75);
  }, 60_000); // two daemon processes started from the source, one after the other

  it('kill -9 under load with the database down loses only calls answered in the last flush interval', async () => {
    const flushMs = 200;
    const dataDir = tempDir();
    const first = await start(dataDir, flushMs);
    await relay.down();
    // Calls at concurrency 4 until the kill; each answered id with the time it was answered.
    const answeredAt = new Map<string, number>();
    let killed = false;
    const loop = async () => {
      while (!killed) {
        try {
          const id = await call(first);
          if (!killed) answeredAt.set(id, Date.now());
        } catch {
          return; // the kill cut this call: it was never answered
        }
      }
    };
    const loops = Array.from({ length: 4 }, loop);
    while (answeredAt.size < 150) await sleep(20);
    const killAt = Date.now();
    killed = true;
    first.child.kill('SIGKILL');
    await Promise.all(loops);
    await new Promise((r) =>
      first.child.exitCode === null && first.child.signalCode === null ? first.child.once('exit', r) : r(null),
    );

    await relay.up();
    const second = await start(dataDir, flushMs);
    const ids = [...answeredAt.keys()];
    // The replay is done when the spool is empty: the count stops growing for a few intervals.
    let seen = -1;
    for (let n = (await eventsWithIds(ids)).n; n !== seen; n = (await eventsWithIds(ids)).n) {
      seen = n;
      await sleep(1_000);
    }
    const stored = new Set(
      (
        await direct.query<{ id: string }>(
          'SELECT event_id::text AS id FROM usage_events WHERE event_id = ANY($1::uuid[])',
          [ids],
        )
      ).map((r) => r.id),
    );
    const lost = ids.filter((id) => !stored.has(id));
    // How long before the kill the oldest lost call was answered (0 when none was lost).
    const window = Math.max(0, ...lost.map((id) => killAt - answeredAt.get(id)!));
    // At most the last flush interval; a margin for timers on a loaded machine.
    expect(
      window,
      `${lost.length} of ${ids.length} answered calls lost, the oldest ${window} ms before the kill`,
    ).toBeLessThanOrEqual(flushMs + 150);
    expect(stored.size + lost.length).toBe(ids.length);
    expect(await second.stop('SIGTERM')).toBe(0);
  }, 90_000);
});
