/**
 * TimescaleDB mode on a real TimescaleDB engine (test/helpers/timescale.ts): how the mode is
 * chosen, the schema, late events and the daemon's refresh, retention then refresh, a replay
 * into a compressed chunk, and `meter migrate --to-timescale` keeping every analytics answer.
 */
import pino from 'pino';
import { beforeAll, describe, expect, it } from 'vitest';
import { listEvents } from '../../src/analytics/events-query.js';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import { loadConfig } from '../../src/config.js';
import { byTag, daily, summary } from '../../src/analytics/rollup-queries.js';
import type { UsageEvent } from '../../src/metering/event.js';
import { runRetention } from '../../src/plans/retention.js';
import { components } from '../../src/server/components.js';
import { startDaemon } from '../../src/server/daemon.js';
import { insertBatch, TAG_VALUES_PER_KEY_DAY } from '../../src/store/event-batch.js';
import { openStore } from '../../src/store/index.js';
import { migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import { refreshAggregates } from '../../src/store/timescale/maintenance.js';
import { aggregateRefresher, nextRefreshDelay } from '../../src/store/timescale/refresher.js';
import type { Db } from '../../src/store/types.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { account, ev } from '../helpers/timescale-fixtures.js';
import { runCli } from '../helpers/cli.js';
import { startFakeUpstream } from '../helpers/upstreams.js';
import { createTestDatabase, postgresUrl, tempDir, timescaleBackend } from '../helpers/stores.js';
import { closeOnEngine, openOnEngine, timescaleDatabase } from '../helpers/timescale.js';

const DAY = 86_400_000;
const now = Date.now();
const dayOf = (t: number) => new Date(t).toISOString().slice(0, 10);
const startOfDay = (t: number) => Math.floor(t / DAY) * DAY;

async function dayRow(db: Db, accountId: string, day: string) {
  const [row] = await db.query<{ spend: string; requests: string }>(
    `SELECT coalesce(sum(spend), 0)::text AS spend, coalesce(sum(requests), 0)::text AS requests FROM usage_daily
      WHERE account_id = $1 AND day = $2::date`,
    [accountId, day],
  );
  return row!;
}

describe('TimescaleDB mode', () => {
  let db: Db;
  beforeAll(async () => {
    db = await timescaleBackend.open();
  }, 120_000);

  it('is chosen for a new database where TimescaleDB can be created: a hypertable of 1-day chunks and real-time aggregates with the plain types', async () => {
    expect(db.kind).toBe('timescale');
    const [ht] = await db.query<{ interval: string }>(
      `SELECT time_interval::text AS interval FROM timescaledb_information.dimensions WHERE hypertable_name = 'usage_events'`,
    );
    expect(ht).toEqual({ interval: '1 day' });
    expect(
      await db.query(
        `SELECT view_name, materialized_only FROM timescaledb_information.continuous_aggregates ORDER BY 1`,
      ),
    ).toEqual([
      { view_name: 'usage_daily', materialized_only: false },
      { view_name: 'usage_quarter_hour', materialized_only: false },
      { view_name: 'usage_tag_daily', materialized_only: false },
      { view_name: 'usage_tag_quarter_hour', materialized_only: false },
    ]);
    const columns = (d: Db, table: string) =>
      d.query<{ name: string; type: string }>(
        `SELECT attname AS name, format_type(atttypid, atttypmod) AS type FROM pg_attribute
        WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`,
        [table],
      );
    if (postgresUrl) {
      const plain = openPostgres(await createTestDatabase());
      atFileEnd(() => plain.close());
      await migrate(plain);
      for (const table of ['usage_daily', 'usage_tag_daily']) {
        expect(await columns(db, table)).toEqual([
          ...(await columns(plain, table)),
          { name: 'bucket', type: 'timestamp with time zone' },
        ]);
      }
    }
  });

  it('refuses to migrate a TimescaleDB database as plain PostgreSQL', async () => {
    await expect(migrate({ ...db, kind: 'postgres' })).rejects.toThrow(/TimescaleDB mode.*cannot be migrated as plain/);
  });

  it('a late event behind the watermark counts once a refresh covers its day; the daemon refreshes by itself', async () => {
    const acct = await account(db, 'pro');
    const yesterday = dayOf(now - DAY);
    const lastMs = startOfDay(now) - 1; // 23:59:59.999 yesterday
    expect(await insertBatch(db, [ev(acct, lastMs - 3_600_000, '1.00000001')])).toEqual({ inserted: 1 });
    expect(await dayRow(db, acct, yesterday)).toEqual({ spend: '1.00000001', requests: '1' }); // real-time part
    await refreshAggregates(db); // yesterday materialized: the watermark is today 00:00
    // Written after midnight's refresh, e.g. a spool replayed after an outage: not seen yet.
    await insertBatch(db, [ev(acct, lastMs, '2.00000002')]);
    expect(await dayRow(db, acct, yesterday)).toEqual({ spend: '1.00000001', requests: '1' });
    const refresher = aggregateRefresher({ store: db, logger: pino({ level: 'silent' }), intervalMs: 100 });
    refresher.start!();
    try {
      await expect
        .poll(() => dayRow(db, acct, yesterday), { timeout: 30_000, interval: 100 })
        .toEqual({ spend: '3.00000003', requests: '2' });
    } finally {
      await refresher.stop!();
    }
    // A sidecar checks every 10 s (one refresh per 50 s for the fleet: a late event within 60 s),
    // and just after 00:00 UTC when that comes sooner.
    expect(nextRefreshDelay(Date.UTC(2026, 4, 1, 12))).toBe(10_000);
    expect(nextRefreshDelay(Date.UTC(2026, 4, 1, 23, 59, 55))).toBe(7_000);
  }, 60_000);

  it("retention drops chunks only past the longest plan retention and compresses past the shortest; a refresh then keeps every account's days", async () => {
    const free = await account(db, 'free'); // 7 days
    const pro = await account(db, 'pro'); // 90 days
    const ages = [1, 8, 30, 100];
    for (const a of [free, pro])
      await insertBatch(
        db,
        ages.map((age) => ev(a, now - age * DAY, '0.5')),
      );
    // Materialize the history once (what the conversion does); afterwards the daemon keeps it.
    await refreshAggregates(db, { from: new Date(now - 120 * DAY) });

    const result = await runRetention(db, { now });
    expect(result!.rawEvents).toBe(0); // no per-account DELETE
    expect(result!.timescale!.droppedChunks).toBeGreaterThanOrEqual(1);
    expect(result!.timescale!.compressedChunks).toBeGreaterThanOrEqual(2);
    const left = async (a: string) =>
      (
        await db.query<{ age: number }>(
          `SELECT round(extract(epoch FROM ($2::timestamptz - time)) / 86400)::int AS age FROM usage_events WHERE account_id = $1 ORDER BY 1`,
          [a, new Date(now)],
        )
      ).map((r) => r.age);
    expect(await left(free)).toEqual([1, 8, 30]);
    expect(await left(pro)).toEqual([1, 8, 30]);
    // A late pro event on the day the free account's raw events are past its plan: the refresh
    // recomputes that day, and the free account's day stays (it was never deleted).
    await insertBatch(db, [ev(pro, now - 30 * DAY + 1, '0.25')]);
    await refreshAggregates(db, { now });
    for (const [a, spend, requests] of [
      [free, '0.50000000', '1'],
      [pro, '0.75000000', '2'],
    ] as const) {
      expect(await dayRow(db, a, dayOf(now - 30 * DAY))).toEqual({ spend, requests });
      expect(await dayRow(db, a, dayOf(now - 100 * DAY))).toEqual({ spend: '0.50000000', requests: '1' }); // chunk dropped, day kept
    }
    // Per-plan retention is a visibility limit: the free account lists only its last 7 days.
    const listed = async (a: string) =>
      (
        (await listEvents(
          db,
          a,
          { limit: 100, cursor: undefined, tag: undefined, from: undefined, to: undefined },
          { retentionVisibility: true, now: new Date(now) },
        )) as {
          events: unknown[];
        }
      ).events.length;
    expect(await listed(free)).toBe(1);
    expect(await listed(pro)).toBe(4);
  }, 60_000);

  it('a replay into a compressed chunk inserts nothing, and a late event there counts once', async () => {
    const acct = await account(db, 'pro');
    const t = now - 20 * DAY;
    const first = [ev(acct, t, '1'), ev(acct, t + 1, '2')];
    await insertBatch(db, first);
    await runRetention(db, { now }); // compresses the chunk
    const [chunk] = await db.query<{ is_compressed: boolean }>(
      `SELECT is_compressed FROM timescaledb_information.chunks WHERE hypertable_name = 'usage_events'
        AND range_start <= $1::timestamptz AND range_end > $1::timestamptz`,
      [new Date(t)],
    );
    expect(chunk).toEqual({ is_compressed: true });
    const late = ev(acct, t + 2, '4');
    expect(await insertBatch(db, [...first, late])).toEqual({ inserted: 1 });
    expect(await insertBatch(db, [...first, late])).toEqual({ inserted: 0 });
    await refreshAggregates(db, { now });
    expect(await dayRow(db, acct, dayOf(t))).toEqual({ spend: '7.00000000', requests: '3' });
  }, 60_000);
});

describe('choosing and converting the mode', () => {
  it('METER_STORE=postgres keeps a new database plain; it stays plain, says how to convert, and METER_STORE=timescale then refuses', async () => {
    const url = await timescaleDatabase();
    const plain = await openOnEngine({ databaseUrl: url, dataDir: tempDir(), store: 'postgres' });
    expect(plain.kind).toBe('postgres');
    await plain.close();
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (l: string) => lines.push(l) });
    const again = await openOnEngine({ databaseUrl: url, dataDir: tempDir() }, logger);
    expect(again.kind).toBe('postgres');
    await again.close();
    expect(lines.join('')).toMatch(/meter migrate --to-timescale/);
    await expect(openOnEngine({ databaseUrl: url, dataDir: tempDir(), store: 'timescale' })).rejects.toThrow(
      /METER_STORE=timescale.*plain PostgreSQL mode.*--to-timescale/,
    );
  }, 60_000);

  it.skipIf(!postgresUrl)(
    "METER_STORE=timescale fails with the server's message and the preload hint where TimescaleDB is missing",
    async () => {
      const err = await openStore({
        databaseUrl: await createTestDatabase(),
        dataDir: tempDir(),
        store: 'timescale',
      }).catch((e: Error) => e);
      expect((err as Error).message).toMatch(
        /TimescaleDB cannot be used on this database: .*timescaledb.*shared_preload_libraries/,
      );
      // Without METER_STORE the same server gives a plain database.
      const db = await openStore({ databaseUrl: await createTestDatabase(), dataDir: tempDir() });
      expect(db.kind).toBe('postgres');
      await db.close();
    },
  );

  it('meter migrate --to-timescale keeps every analytics answer, including days retention deleted and capped tag values', async () => {
    const url = await timescaleDatabase();
    const db = await openOnEngine({ databaseUrl: url, dataDir: tempDir(), store: 'postgres' });
    const free = await account(db, 'free');
    const pro = await account(db, 'pro');
    const events: UsageEvent[] = [];
    for (const a of [free, pro]) {
      for (let age = 0; age < 40; age += 3) {
        for (let i = 0; i < 3; i++) {
          events.push(
            ev(a, now - age * DAY - i * 60_000, `${age}.${i}0000001`, { team: ['a', 'b'][i % 2]!, env: 'prod' }),
          );
        }
      }
    }
    // One day with more tag values than the plain rollup keeps (the rest go to its overflow row).
    const capped = startOfDay(now - 2 * DAY);
    for (let i = 0; i < TAG_VALUES_PER_KEY_DAY + 20; i++)
      events.push(ev(pro, capped + i, '0.00000001', { user: `u${i}` }));
    await insertBatch(db, events);
    await runRetention(db, { now }); // plain mode: the free account's raw events older than 7 days go
    const answers = async (d: Db) => {
      const at = new Date(now);
      const out: unknown[] = [];
      for (const a of [free, pro]) {
        out.push(await daily(d, a, at, 60), await summary(d, a, at));
        for (const key of ['team', 'env', 'user']) out.push(await byTag(d, a, at, key, 'quarter'));
      }
      return out;
    };
    const before = await answers(db);
    expect(JSON.stringify(before)).toContain('"value":""'); // the overflow row is part of the answer
    await closeOnEngine(db, url);

    const res = await runCli(['migrate', '--to-timescale', '--json'], {
      DATABASE_URL: url,
      METER_DB_POOL_MAX: '1',
      METER_DATA_DIR: tempDir(),
    });
    expect(res.stderr).toBe('');
    expect(JSON.parse(res.stdout)).toMatchObject({ store: 'timescale', conversion: 'converted' });

    const ts = await openOnEngine({ databaseUrl: url, dataDir: tempDir() });
    atFileEnd(() => ts.close());
    expect(ts.kind).toBe('timescale');
    expect(await answers(ts)).toEqual(before);
    // From here on the mode's own rules: a late event counts after a refresh, the rest stays.
    await refreshAggregates(ts, { now });
    await insertBatch(ts, [ev(free, now - 20 * DAY, '5')]);
    await refreshAggregates(ts, { now });
    expect(await dayRow(ts, free, dayOf(now - 20 * DAY))).toEqual({ spend: '5.00000000', requests: '1' });
    const after = await answers(ts);
    expect(after.slice(5)).toEqual(before.slice(5)); // the pro account's answers did not move
    // The migration records: plain files of the base, then the conversion.
    expect(
      await ts.query(`SELECT version, variant FROM schema_migrations WHERE variant IS NOT NULL ORDER BY version`),
    ).toEqual([
      { version: 2, variant: 'plain' },
      { version: 20, variant: 'timescale' },
      { version: 110, variant: 'timescale' },
      { version: 132, variant: 'timescale' },
      { version: 140, variant: 'timescale' },
    ]);
    // The tag table was filled from the events already there (sql/110).
    const [tagged] = await ts.query<{ events: string; copies: string }>(
      `SELECT (SELECT count(*) FROM usage_events e, jsonb_each(e.tags))::text AS events,
        (SELECT count(*) FROM usage_event_tags)::text AS copies`,
    );
    expect(tagged!.copies).toBe(tagged!.events);
  }, 180_000);
});

describe('the daemon on TimescaleDB', () => {
  it('runs through DATABASE_URL with a pool of one: logs its mode and versions, meters a call, answers analytics at once', async () => {
    const upstream = await startFakeUpstream();
    upstream.respond((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'chatcmpl-1',
          object: 'chat.completion',
          created: 1,
          model: 'gpt-4o-mini-2024-07-18',
          choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 1000, completion_tokens: 100, total_tokens: 1100 },
        }),
      );
    });
    const config = loadConfig({
      DATABASE_URL: await timescaleDatabase(),
      METER_DB_POOL_MAX: '1',
      METER_PORT: '0',
      METER_DATA_DIR: tempDir(),
      METER_FLUSH_INTERVAL_MS: '20',
      METER_UPSTREAM_OPENAI: `${upstream.origin}/v1`,
    });
    const lines: string[] = [];
    const daemon = await startDaemon(
      config,
      pino({ level: 'info' }, { write: (l: string) => lines.push(l) }),
      components,
    );
    try {
      const started = lines
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l.msg === 'store: timescale');
      expect(started).toMatchObject({
        store: 'timescale',
        postgresql: '17.5',
        timescaledb: expect.stringMatching(/^2\.2[3-9]/),
      });
      await createAccount(daemon.store, 'ts-e2e', 'pro');
      const { key } = await createKey(daemon.store, 'ts-e2e');
      const call = await fetch(`${daemon.url}/proxy/openai/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-metering-tags': 'team=ts' },
        body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hello' }] }),
      });
      expect(call.status).toBe(200);
      await call.text();
      const summary = async () =>
        (await (
          await fetch(`${daemon.url}/analytics/summary`, { headers: { authorization: `Bearer ${key}` } })
        ).json()) as { requests: number; spend: number };
      await expect.poll(async () => (await summary()).requests, { timeout: 20_000, interval: 50 }).toBe(1);
      expect((await summary()).spend).toBeGreaterThan(0);
      const byTag = await (
        await fetch(`${daemon.url}/analytics/by-tag?key=team&period=month`, {
          headers: { authorization: `Bearer ${key}` },
        })
      ).json();
      expect(byTag).toMatchObject({ groups: [{ value: 'ts', requests: 1 }] });
    } finally {
      await daemon.close();
    }
  }, 120_000);
});
