import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { beforeAll, describe, expect, it } from 'vitest';
import type { UsageEvent } from '../../src/metering/event.js';
import { insertBatch, TAG_OVERFLOW_VALUE, TAG_VALUES_PER_KEY_DAY } from '../../src/store/event-batch.js';
import { migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import type { Db } from '../../src/store/types.js';
import { EventWriter, type EventWriterOptions } from '../../src/store/writer.js';
import { ACCOUNTS, expectedDaily, makeEvents } from '../metering/events.js';
import { createTestDatabase, describeEachBackend, postgresUrl, tempDir } from '../helpers/stores.js';

const silent = pino({ level: 'silent' });

function startWriter(db: Db, opts: Partial<EventWriterOptions> = {}): EventWriter {
  const w = new EventWriter({
    db,
    logger: silent,
    spoolDir: tempDir('meter-spool-'),
    flushIntervalMs: 20,
    batchSize: 200,
    ...opts,
  });
  w.start();
  return w;
}

const DAILY_SQL = `SELECT account_id::text || '|' || day::text || '|' || provider || '|' || model AS k,
  spend::text AS spend, requests::int AS requests, input_tokens::int AS input FROM usage_daily ORDER BY k`;

async function dailyRows(db: Db) {
  return db.query<{ k: string; spend: string; requests: number; input: number }>(DAILY_SQL);
}

/** Tag rollups recomputed from the raw events, and the rollup table, as comparable text. */
async function tagSums(db: Db) {
  const raw =
    await db.query(`SELECT account_id, (time AT TIME ZONE 'UTC')::date::text AS day, t.key AS tag_key, t.value AS tag_value,
      sum(cost)::text AS spend, count(*)::int AS requests
    FROM usage_events, jsonb_each_text(tags) AS t(key, value) GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4`);
  const rolled =
    await db.query(`SELECT account_id, day::text AS day, tag_key, tag_value, spend::text AS spend, requests::int AS requests
    FROM usage_tag_daily ORDER BY 1, 2, 3, 4`);
  return { raw, rolled };
}

describeEachBackend(
  'EventWriter',
  (backend) => {
    let db: Db;
    let firstEvents: UsageEvent[] = [];
    beforeAll(async () => {
      db = await backend.open();
    }, 120_000); // a WASM start (embedded, TimescaleDB engine)

    it('writes every event once, and the rollups equal the raw events to the last decimal', async () => {
      const events = (firstEvents = makeEvents(700, 11));
      const writer = startWriter(db);
      for (const e of events) writer.push(e);
      await writer.drain();
      expect(writer.stats()).toMatchObject({ written: 700, failedAttempts: 0, deadLettered: 0, backlog: 0 });
      await writer.stop();

      const { n } = (await db.query<{ n: number }>('SELECT count(DISTINCT event_id)::int AS n FROM usage_events'))[0]!;
      expect(n).toBe(700);
      const want = [...expectedDaily(events)].map(([k, v]) => ({ k, ...v })).sort((a, b) => (a.k < b.k ? -1 : 1));
      expect(await dailyRows(db)).toEqual(want);
      const { raw, rolled } = await tagSums(db);
      expect(rolled.length).toBeGreaterThan(10);
      expect(rolled).toEqual(raw);
      // an event's fields survive the trip
      const e = events.find((x) => x.tags.note && x.providerCostTicks && x.ttfbMs === null) ?? events[0]!;
      const [row] = await db.query<Record<string, unknown>>(
        `SELECT time, event_id, cost::text AS cost, tags, provider_cost_ticks, ttfb_ms, requested_model, usage_source, stream, status
       FROM usage_events WHERE event_id = $1`,
        [e.id],
      );
      expect(row).toMatchObject({
        event_id: e.id,
        cost: e.cost,
        tags: e.tags,
        provider_cost_ticks: e.providerCostTicks,
        ttfb_ms: e.ttfbMs,
        requested_model: e.requestedModel,
        usage_source: e.usageSource,
        stream: e.stream,
        status: e.status,
      });
      expect(new Date(row!.time as string).toISOString()).toBe(e.time);
    });

    it('text with quotes, backslashes, escapes and non-ASCII arrives unchanged, units and tier too', async () => {
      // `$'`, `$&`, `$\`` are replacement patterns of String.replace: they must reach the database as text
      const odd = `o'neil \\ "q" \\' \n\t ü 😀 $1 E'x' $' $& $\` $$`;
      const e = {
        ...makeEvents(1, 41)[0]!,
        model: odd,
        requestedModel: `'; DROP TABLE usage_events; --`,
        tags: { team: odd, "k'ey": 'v\\' },
        units: { input_audio_tokens: 7, web_search_requests: 2 },
        serviceTier: 'flex',
      };
      const writer = startWriter(db);
      writer.push(e);
      await writer.drain();
      await writer.stop();
      const [row] = await db.query<Record<string, unknown>>(
        'SELECT model, requested_model, tags, units, service_tier, cost::text AS cost FROM usage_events WHERE event_id = $1',
        [e.id],
      );
      expect(row).toEqual({
        model: odd,
        requested_model: e.requestedModel,
        tags: e.tags,
        units: e.units,
        service_tier: 'flex',
        cost: e.cost,
      });
    });

    it('a replayed batch changes nothing', async () => {
      const before = { daily: await dailyRows(db), tags: (await tagSums(db)).rolled };
      const events = firstEvents; // the same ids as above
      expect(events).toHaveLength(700);
      expect(await insertBatch(db, events.slice(0, 300))).toEqual({ inserted: 0 });
      const writer = startWriter(db);
      for (const e of events) writer.push(e);
      await writer.drain();
      await writer.stop();
      expect(writer.stats().written).toBe(0);
      expect({ daily: await dailyRows(db), tags: (await tagSums(db)).rolled }).toEqual(before);
    });

    it('an event the database rejects goes to the dead-letter file; the rest of its batch is written', async () => {
      const good = makeEvents(60, 23, { accountId: ACCOUNTS[1]!, time: '2026-04-01T10:00:00.000Z' }).map((e, i) => ({
        ...e,
        time: new Date(Date.parse(e.time) + i).toISOString(),
      }));
      const badJson = { ...makeEvents(1, 24)[0]!, tags: { team: 'nul\u0000byte' } }; // jsonb refuses \u0000
      const badStatus = { ...makeEvents(1, 25)[0]!, status: 70_000 }; // smallint out of range
      const writer = startWriter(db, { batchSize: 1000 });
      const all: UsageEvent[] = [...good.slice(0, 30), badJson, ...good.slice(30), badStatus];
      for (const e of all) writer.push(e);
      await writer.drain();
      expect(writer.stats()).toMatchObject({ deadLettered: 2, written: 60, backlog: 0 });
      const letters = readFileSync(writer.deadLetterPath, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { reason: string; event: UsageEvent });
      expect(letters.map((l) => l.event.id).sort()).toEqual([badJson.id, badStatus.id].sort());
      expect(letters.every((l) => /^2[23]/.test(l.reason))).toBe(true);
      await writer.stop();
      const { n } = (
        await db.query<{ n: number }>('SELECT count(*)::int AS n FROM usage_events WHERE time >= $1', ['2026-04-01'])
      )[0]!;
      expect(n).toBe(60);
    });

    it('a spool line that is not JSON (a torn write found at start) is dead-lettered as it is; the lines around it are written', async () => {
      const [a, b] = makeEvents(2, 26, { accountId: ACCOUNTS[1]!, time: '2026-04-02T10:00:00.000Z' }).map((e, i) => ({
        ...e,
        time: new Date(Date.parse(e.time) + i).toISOString(),
      }));
      const spoolDir = tempDir('meter-spool-');
      writeFileSync(
        join(spoolDir, 'seg-000000000003.jsonl'),
        `${JSON.stringify(a)}\n\u0000\u0000{"torn\n${JSON.stringify(b)}\n`,
      );
      const writer = startWriter(db, { spoolDir });
      await writer.drain();
      expect(writer.stats()).toMatchObject({ deadLettered: 1, written: 2, backlog: 0 });
      const [letter, ...more] = readFileSync(writer.deadLetterPath, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { reason: string; line: string });
      expect(more).toEqual([]);
      expect(letter!.line).toBe('\u0000\u0000{"torn');
      expect(letter!.reason).toMatch(/^unreadable spool line \(2[23]/);
      await writer.stop();
      const ids = await db.query<{ id: string }>(
        'SELECT event_id::text AS id FROM usage_events WHERE time >= $1 AND time < $2 ORDER BY time',
        ['2026-04-02', '2026-04-03'],
      );
      expect(ids.map((r) => r.id)).toEqual([a!.id, b!.id]);
    });

    // TimescaleDB mode keeps every value: an aggregate cannot rank rows (README "Storage").
    const capped = backend.name !== 'timescale';
    it(
      capped
        ? `rolls up at most ${TAG_VALUES_PER_KEY_DAY} values of a tag key per account and day; the rest into one overflow row, totals exact`
        : "rolls up every value of a tag key, past the plain rollup's per-day cap, totals exact",
      async () => {
        const extra = 150;
        const events = makeEvents(TAG_VALUES_PER_KEY_DAY + extra, 31, {
          accountId: ACCOUNTS[0]!,
          time: '2026-05-05T00:00:00.000Z',
        }).map((e, i) => ({
          ...e,
          time: new Date(Date.parse(e.time) + i).toISOString(),
          tags: { user: `u${i}`, team: 'x' },
        }));
        const writer = startWriter(db, { batchSize: 400 });
        for (const e of events) writer.push(e);
        await writer.drain();
        await writer.stop();
        const rows = await db.query<{ tag_value: string; spend: string; requests: string }>(
          `SELECT tag_value, spend::text AS spend, requests::text AS requests FROM usage_tag_daily
       WHERE account_id = $1 AND day = '2026-05-05' AND tag_key = 'user'`,
          [ACCOUNTS[0]],
        );
        if (capped) {
          expect(rows).toHaveLength(TAG_VALUES_PER_KEY_DAY + 1);
          const overflow = rows.find((r) => r.tag_value === TAG_OVERFLOW_VALUE)!;
          expect(Number(overflow.requests)).toBe(extra);
        } else {
          expect(rows).toHaveLength(TAG_VALUES_PER_KEY_DAY + extra);
          expect(rows.find((r) => r.tag_value === TAG_OVERFLOW_VALUE)).toBeUndefined();
        }
        const [sums] = await db.query<{ spend: string; requests: number; team: string }>(
          `SELECT sum(spend)::text AS spend, sum(requests)::int AS requests,
         (SELECT spend::text FROM usage_tag_daily WHERE account_id = $1 AND day = '2026-05-05' AND tag_key = 'team') AS team
       FROM usage_tag_daily WHERE account_id = $1 AND day = '2026-05-05' AND tag_key = 'user'`,
          [ACCOUNTS[0]],
        );
        const total = expectedDaily(events);
        const spend = [...total.values()].reduce((a, v) => a + BigInt(v.spend.replace('.', '')), 0n);
        const want = `${spend / 100_000_000n}.${(spend % 100_000_000n).toString().padStart(8, '0')}`;
        expect(sums).toEqual({ spend: want, requests: events.length, team: want });
      },
    );
  },
  { timescale: true },
);

describe.skipIf(!postgresUrl)('EventWriter, concurrent writers on PostgreSQL', () => {
  it('four writers on the same rollup rows finish without a deadlock or a retry, sums exact', async () => {
    const url = await createTestDatabase();
    const dbs = Array.from({ length: 4 }, () => openPostgres(url, { max: 2 }));
    await migrate(dbs[0]!);
    // the same accounts, days, models and tags everywhere: every batch contends for the same rows
    const sets = dbs.map((_, i) => makeEvents(2500, 100 + i));
    const writers = dbs.map((db) => startWriter(db, { batchSize: 250, flushIntervalMs: 10 }));
    sets.forEach((events, i) => events.forEach((e) => writers[i]!.push(e)));
    await Promise.all(writers.map((w) => w.drain(60_000)));
    for (const w of writers) expect(w.stats()).toMatchObject({ failedAttempts: 0, written: 2500 });
    await Promise.all(writers.map((w) => w.stop()));
    const want = [...expectedDaily(sets.flat())].map(([k, v]) => ({ k, ...v })).sort((a, b) => (a.k < b.k ? -1 : 1));
    expect(await dailyRows(dbs[0]!)).toEqual(want);
    const { raw, rolled } = await tagSums(dbs[0]!);
    expect(rolled).toEqual(raw);
    await Promise.all(dbs.map((d) => d.close()));
  });
});
