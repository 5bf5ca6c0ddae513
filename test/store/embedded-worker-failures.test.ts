import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEmbedded } from '../../src/store/embedded.js';
import { migrate } from '../../src/store/migrate.js';
import type { Db } from '../../src/store/types.js';
import { EventWriter } from '../../src/store/writer.js';
import type { UsageEvent } from '../../src/metering/event.js';
import { expectedDaily, makeEvents } from '../metering/events.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { tempDir } from '../helpers/stores.js';

/**
 * The embedded store's worker dies (a WASM abort, out of memory) at chosen moments: the writer
 * says so, keeps the events in its spool, a new worker starts on the same data directory, and
 * every event is written exactly once, rollups included.
 */
const dyingWorker = new URL('../helpers/dying-embedded-worker.js', import.meta.url);

describe('embedded store: the worker dies and a new one takes over', () => {
  let db: Db;
  let writer: EventWriter;
  const lines: Record<string, unknown>[] = [];
  const pushed: UsageEvent[] = [];
  let seed = 1;

  beforeAll(async () => {
    db = await openEmbedded(tempDir(), { workerFile: dyingWorker });
    atFileEnd(() => db.close());
    await migrate(db);
    const logger = pino(
      { level: 'info' },
      { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) },
    );
    writer = new EventWriter({
      db,
      logger,
      spoolDir: tempDir('meter-spool-'),
      flushIntervalMs: 25,
      batchSize: 200,
      maxBackoffMs: 300,
    });
    writer.start();
    atFileEnd(() => writer.stop());
  });
  afterAll(() => writer.stop());

  const push = (n: number) => {
    for (const e of makeEvents(n, seed++)) {
      writer.push(e);
      pushed.push(e);
    }
  };

  async function expectEachEventOnce(): Promise<void> {
    await writer.drain(60_000);
    const [row] = await db.query<{ n: number; distinct: number }>(
      'SELECT count(*)::int AS n, count(DISTINCT event_id)::int AS distinct FROM usage_events',
    );
    expect(row).toEqual({ n: pushed.length, distinct: pushed.length });
    const daily = await db.query<{ k: string; spend: string; requests: number; input: number }>(
      "SELECT account_id::text || '|' || day::text || '|' || provider || '|' || model AS k, spend::text AS spend, requests::int AS requests, input_tokens::int AS input FROM usage_daily ORDER BY k",
    );
    const want = [...expectedDaily(pushed)].map(([k, v]) => ({ k, ...v })).sort((a, b) => (a.k < b.k ? -1 : 1));
    expect(daily).toEqual(want);
  }

  // at-start: dies mid-statement, and the first new worker dies while starting too.
  it.each(['after-commit', 'at-start'])(
    'dies %s: reported, spooled, recovered, each event written once',
    async (when) => {
      push(150);
      await writer.drain();
      const failedBefore = writer.stats().failedAttempts;
      await db.query(`SELECT 'meter-test: die ${when}'`);
      push(300);
      const deadline = Date.now() + 20_000;
      while (writer.stats().failedAttempts === failedBefore && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 10));
      expect(writer.stats().failedAttempts).toBeGreaterThan(failedBefore);
      await expectEachEventOnce();
      expect(lines.some((l) => String((l as { err?: unknown }).err).includes("embedded store's worker stopped"))).toBe(
        true,
      );
    },
  );
});
