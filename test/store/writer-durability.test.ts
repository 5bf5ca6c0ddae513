import { readdirSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import type { Db } from '../../src/store/types.js';
import { EventWriter, type EventWriterOptions } from '../../src/store/writer.js';
import { expectedDaily, makeEvents } from '../metering/events.js';
import { eventually } from '../helpers/fleet.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { createTestDatabase, postgresUrl, tempDir } from '../helpers/stores.js';

/** pino lines, kept to check what the writer tells the operator. */
function captureLogger() {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: 'info' },
    { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) },
  );
  return { logger, lines };
}

/** A full GC, so heap numbers mean live data (the flag can be set at run time). */
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Live memory: the JS heap and the ArrayBuffers (the spool's chunks and reads) still held. The
 *  memory of buffers a collection finds dead is freed by a background thread, after it returns:
 *  on a loaded machine a reading taken at once counted megabytes of them, so it waits and
 *  collects again. */
const liveHeap = async () => {
  gc();
  await sleep(100);
  gc();
  const { heapUsed, arrayBuffers } = process.memoryUsage();
  return heapUsed + arrayBuffers;
};

async function countEvents(db: Db): Promise<{ n: number; distinct: number }> {
  const [row] = await db.query<{ n: number; distinct: number }>(
    'SELECT count(*)::int AS n, count(DISTINCT event_id)::int AS distinct FROM usage_events',
  );
  return row!;
}

describe.skipIf(!postgresUrl)('EventWriter durability, PostgreSQL behind a relay that goes down and comes back', () => {
  let direct: Db;
  let relay: TcpProxy;
  let viaRelay: Db;
  const writers: EventWriter[] = [];

  beforeAll(async () => {
    const url = await createTestDatabase();
    direct = openPostgres(url);
    await migrate(direct);
    relay = await startTcpProxy(url);
    viaRelay = openPostgres(relay.urlFor(url), { max: 2 });
  });
  afterAll(async () => {
    for (const w of writers) await w.stop();
    await viaRelay.close();
    await relay.close();
    await direct.close();
  });

  const writer = (opts: Partial<EventWriterOptions> & { logger?: pino.Logger } = {}) => {
    const w = new EventWriter({
      db: viaRelay,
      logger: pino({ level: 'silent' }),
      spoolDir: tempDir('meter-spool-'),
      flushIntervalMs: 25,
      batchSize: 500,
      maxBackoffMs: 200,
      stopTimeoutMs: 1_500,
      ...opts,
    });
    w.start();
    writers.push(w);
    return w;
  };

  it('database down: pushes return at once, events wait in the spool, then are all written exactly once', async () => {
    const w = writer();
    const before = makeEvents(100, 1);
    for (const e of before) w.push(e);
    await w.drain();
    expect(await countEvents(direct)).toEqual({ n: 100, distinct: 100 });

    await relay.down();
    const during = makeEvents(1_000, 2);
    const t = performance.now();
    for (const e of during) w.push(e);
    expect(performance.now() - t).toBeLessThan(500); // the hot path never waits for the database
    // a write was tried and failed (waited for, not slept for: a loaded machine flushes late)
    await eventually(async () => w.stats().failedAttempts > 0, 10_000, 'a failed write attempt');
    expect(w.stats().backlog).toBe(1_000);
    expect(await countEvents(direct)).toEqual({ n: 100, distinct: 100 });

    await relay.up();
    await w.drain();
    expect(await countEvents(direct)).toEqual({ n: 1_100, distinct: 1_100 });
    const daily = await direct.query<{ spend: string; requests: number }>(
      "SELECT account_id::text || '|' || day::text || '|' || provider || '|' || model AS k, spend::text AS spend, requests::int AS requests, input_tokens::int AS input FROM usage_daily ORDER BY k",
    );
    const want = [...expectedDaily([...before, ...during])]
      .map(([k, v]) => ({ k, ...v }))
      .sort((a, b) => (a.k < b.k ? -1 : 1));
    expect(daily).toEqual(want);
  });

  it('memory stays bounded under a large backlog; everything is written once the database is back', async () => {
    await relay.down();
    const w = writer({ segmentMaxEvents: 1_000, batchSize: 1_000 });
    const total = 40_000;
    let heapAt10k = 0;
    for (let i = 0; i < total; i += 1_000) {
      if (i === 10_000) {
        while (w.stats().buffered > 0) await sleep(20);
        heapAt10k = await liveHeap();
      }
      for (const e of makeEvents(1_000, 1_000 + i)) w.push(e);
      await sleep(5); // let flushes run, as they do between calls
    }
    while (w.stats().buffered > 0) await sleep(20); // everything pushed is on disk
    // the whole backlog waits on disk, none of it in memory
    expect(w.stats()).toMatchObject({ backlog: total, buffered: 0 });
    expect(w.backlogBytes()).toBeGreaterThan(total * 300);
    // flat: the last 30k events (~21 MB of JSON) went to disk, not to memory (the spool keeps up
    // to 2 MB of its write chunks for reuse, and its read buffer a batch)
    expect((await liveHeap()) - heapAt10k).toBeLessThan(10 << 20);

    const { n: start } = await countEvents(direct);
    await relay.up();
    await w.drain(60_000);
    expect(await countEvents(direct)).toEqual({ n: start + total, distinct: start + total });
    expect(w.stats()).toMatchObject({ backlog: 0, buffered: 0, deadLettered: 0 });
  }, 90_000); // 40k events spilled and replayed; drain alone may take up to 60 s

  it('stop with the database unreachable is bounded, says how many events stay, and the next start writes them', async () => {
    const { logger, lines } = captureLogger();
    const spoolDir = tempDir('meter-spool-');
    await relay.down();
    const first = writer({ spoolDir, logger, stopTimeoutMs: 700 });
    const events = makeEvents(250, 77);
    for (const e of events) first.push(e);
    const t = Date.now();
    await first.stop();
    expect(Date.now() - t).toBeLessThan(3_000);
    const kept = lines.find((l) => String(l.msg).includes('stay in the spool'));
    expect(kept).toMatchObject({ events: 250 });
    expect(readdirSync(spoolDir).some((f) => f.startsWith('seg-'))).toBe(true);

    await relay.up();
    const { n: start } = await countEvents(direct);
    const second = writer({ spoolDir, logger });
    await second.drain();
    expect(await countEvents(direct)).toEqual({ n: start + 250, distinct: start + 250 });
    await second.stop();
    expect(readdirSync(spoolDir).filter((f) => f.startsWith('seg-'))).toEqual([]);
  });

  it('stop while the database is already failing makes one last attempt, not the whole stop timeout', async () => {
    await relay.down();
    const w = writer({ stopTimeoutMs: 10_000 });
    for (const e of makeEvents(50, 91)) w.push(e);
    while (w.stats().failures === 0) await sleep(10);
    const t = Date.now();
    await w.stop();
    expect(Date.now() - t).toBeLessThan(2_500);
    await relay.up();
  });
});
