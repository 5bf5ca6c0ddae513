/**
 * Analytics latency at scale on PostgreSQL: seeds a throwaway database with N usage events
 * (generate_series, with their rollups), serves the analytics component on a loopback port and
 * reports p50 / p99 of each endpoint over HTTP. Target: p50 < 10 ms at 5M events.
 *
 *   npm run bench:analytics -- [--events 5000000] [--requests 300] [--export-requests 10] [--keep] [--timescale | --engine]
 *                              [--database meter_bench_… (one kept before: migrated, not seeded again)]
 *
 * --timescale: the database in TimescaleDB mode (the server must have TimescaleDB): events in
 * the hypertable, the continuous aggregates refreshed and chunks past the shortest plan
 * retention compressed, as the daemon keeps them. --engine: TimescaleDB mode on the test
 * engine (WASM PGlite + TimescaleDB, test/helpers/timescale-engine.mjs), one connection.
 *
 * PostgreSQL: BENCH_DATABASE_URL, else METER_TEST_DATABASE_URL, else postgres://root@127.0.0.1:5432/test
 * (a database `meter_bench_…` is created next to it and dropped at the end unless --keep).
 * Half of the events belong to one heavy account, the one measured; the rest is spread over
 * 19 others, so every query has to skip other accounts' rows.
 */
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { createAnalytics } from '../src/analytics/index.js';
import type { Authenticator, Principal } from '../src/auth/types.js';
import { runRetention } from '../src/plans/retention.js';
import { migrate } from '../src/store/migrate.js';
import { openPostgres } from '../src/store/postgres.js';
import { ensureTimescale, inTimescaleMode } from '../src/store/timescale/mode.js';
import { admin, baseUrl, log, seed } from './seed.js';
import { hasFlag, numberFlag, stringFlag } from './args.js';

const EVENTS = numberFlag('events', Number(process.env.BENCH_EVENTS ?? 5_000_000));
const REQUESTS = numberFlag('requests', 300);
/** An export reads every row of its range: each run takes a second or more at 5M events. */
const EXPORT_REQUESTS = numberFlag('export-requests', 10);
const KEEP = hasFlag('keep');
const ENGINE = hasFlag('engine');
const TIMESCALE = ENGINE || hasFlag('timescale');
/** A database an earlier run kept: measured again (after pending migrations and upkeep), not re-seeded. */
const REUSE = stringFlag('database');
/** The test engine in a child process; its URL and how to stop it. */
async function startEngine(): Promise<{ url: string; stop(): void }> {
  const child = fork(fileURLToPath(new URL('../test/helpers/timescale-engine.mjs', import.meta.url)), {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const reply = (pred: (m: { ready?: boolean; id?: number; port?: number }) => boolean) =>
    new Promise<{ port?: number }>((resolve) =>
      child.on('message', (m: { ready?: boolean; id?: number; port?: number }) => pred(m) && resolve(m)),
    );
  await reply((m) => m.ready === true);
  child.send({ op: 'open', id: 1 });
  const { port } = await reply((m) => m.id === 1);
  return { url: `postgres://postgres@127.0.0.1:${port}/postgres`, stop: () => child.kill() };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

async function main(): Promise<void> {
  const dbName = ENGINE ? 'the test engine' : (REUSE ?? `meter_bench_${randomBytes(4).toString('hex')}`);
  const engine = ENGINE ? await startEngine() : undefined;
  if (!engine && !REUSE) await admin(`CREATE DATABASE ${dbName}`);
  const url = new URL(engine?.url ?? baseUrl);
  if (!engine) url.pathname = `/${dbName}`;
  const plain = openPostgres(url.toString(), { max: engine ? 1 : 10 });
  const db = TIMESCALE ? inTimescaleMode(plain) : plain;
  const started = performance.now();
  let server: ReturnType<typeof createServer> | undefined;
  try {
    if (TIMESCALE) await ensureTimescale(db);
    await migrate(db);
    let accounts: string[];
    if (REUSE) {
      accounts = (
        await db.query<{ id: string }>(`SELECT id FROM accounts WHERE name LIKE 'bench-%' ORDER BY length(name), name`)
      ).map((r) => r.id);
      if (TIMESCALE) await runRetention(db); // compresses what the migrations added
      await db.exec('VACUUM ANALYZE');
    } else {
      log(`seeding ${EVENTS.toLocaleString('en')} events into ${dbName}`);
      accounts = await seed(db, EVENTS, { timescale: TIMESCALE });
    }
    const [sizes] = await db.query<{ events: string; daily: string; tags: string; size: string }>(`SELECT
      (SELECT count(*) FROM usage_events) AS events, (SELECT count(*) FROM usage_daily) AS daily,
      (SELECT count(*) FROM usage_tag_daily) AS tags, pg_size_pretty(pg_database_size(current_database())) AS size`);
    log(
      `mode: ${db.kind}${TIMESCALE ? ` (TimescaleDB ${(await db.query<{ v: string }>(`SELECT extversion AS v FROM pg_extension WHERE extname = 'timescaledb'`))[0]?.v})` : ''}`,
    );
    log(`seeded in ${((performance.now() - started) / 1000).toFixed(0)} s: ${JSON.stringify(sizes)}`);

    // Bench only: one fixed key for the heavy account.
    const principal: Principal = {
      keyId: 'bench0000000',
      accountId: accounts[0]!,
      accountName: 'bench-0',
      plan: 'pro',
    };
    const key = `mk_bench0000000_${randomBytes(16).toString('hex')}`;
    const auth: Authenticator = { authenticate: (h) => (h.authorization === `Bearer ${key}` ? principal : undefined) };
    const handler = createAnalytics({ store: db, authenticator: auth, retentionVisibility: db.kind === 'timescale' })
      .routes!['/analytics/']!;
    server = createServer((req, res) => void handler(req, res));
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const get = async (path: string) => {
      const res = await fetch(base + path, { headers: { authorization: `Bearer ${key}` } });
      const body = await res.text();
      if (res.status !== 200) throw new Error(`${path}: ${res.status} ${body}`);
      return body;
    };

    // Cursors deep into the listing, to measure pages other than the first.
    const cursors: string[] = [];
    let cursor: string | null = null;
    for (let i = 0; i < 40; i++) {
      cursor = (
        JSON.parse(await get(`/analytics/events?limit=500${cursor ? `&cursor=${cursor}` : ''}`)) as {
          next_cursor: string | null;
        }
      ).next_cursor;
      if (!cursor) break;
      cursors.push(cursor);
    }
    const day = (ago: number) => new Date(Date.now() - ago * 86_400_000).toISOString().slice(0, 10);
    const endpoints: [string, (i: number) => string][] = [
      ['daily?days=30', () => '/analytics/daily?days=30'],
      ['daily?days=90', () => '/analytics/daily?days=90'],
      ['summary', () => '/analytics/summary'],
      ['by-tag?key=team&period=month', () => '/analytics/by-tag?key=team&period=month'],
      ['by-tag?key=feature&period=quarter', () => '/analytics/by-tag?key=feature&period=quarter'],
      ['events (first page, 50)', () => '/analytics/events'],
      ['events (deep pages, 50)', (i) => `/analytics/events?cursor=${cursors[i % cursors.length]}`],
      ['events?limit=500', () => '/analytics/events?limit=500'],
      ['events?provider=anthropic', () => '/analytics/events?provider=anthropic'],
      ['events?model=gpt-4o', () => '/analytics/events?model=gpt-4o'],
      ['events?tag=team:t3', () => '/analytics/events?tag=team:t3'],
      ['events?tag=feature:f10 (0.6% of calls)', () => '/analytics/events?tag=feature:f10'],
      ['events?tag=feature:f9 (other accounts only)', () => '/analytics/events?tag=feature:f9'],
      ['events?tag=job:nightly (0.005% of calls)', () => '/analytics/events?tag=job:nightly'],
      ['events?from=…&to=… (one day)', () => `/analytics/events?from=${day(30)}&to=${day(30)}T23:59:59Z`],
      // Streamed: every row of the range, so fewer runs (EXPORT_REQUESTS).
      ['export?format=csv (one day, raw)', () => `/analytics/export?format=csv&from=${day(30)}`],
      [
        'export?group_by=model (30 days)',
        () => `/analytics/export?format=csv&group_by=model&from=${day(30)}&to=${day(0)}`,
      ],
    ];
    const results: { endpoint: string; p50: string; p99: string; max: string }[] = [];
    for (const [name, path] of endpoints) {
      const runs = name.startsWith('export') ? Math.min(REQUESTS, EXPORT_REQUESTS) : REQUESTS;
      for (let i = 0; i < (runs < REQUESTS ? 2 : 20); i++) await get(path(i)); // warm caches and connections
      const times: number[] = [];
      for (let i = 0; i < runs; i++) {
        const t0 = performance.now();
        await get(path(i));
        times.push(performance.now() - t0);
      }
      times.sort((a, b) => a - b);
      const ms = (v: number) => v.toFixed(2);
      results.push({
        endpoint: name,
        p50: ms(percentile(times, 50)),
        p99: ms(percentile(times, 99)),
        max: ms(times[times.length - 1]!),
      });
      log(`${name}: p50 ${ms(percentile(times, 50))} ms`);
    }
    console.log(
      `\nanalytics on ${ENGINE ? 'the TimescaleDB test engine (WASM)' : TIMESCALE ? 'TimescaleDB' : 'PostgreSQL'}, ${Number(sizes!.events).toLocaleString('en')} events (${sizes!.daily} daily rows, ${sizes!.tags} tag rows, ${sizes!.size}); ` +
        `heavy account holds half; ${REQUESTS} sequential requests each (exports ${Math.min(REQUESTS, EXPORT_REQUESTS)}) over HTTP (ms)\n`,
    );
    console.table(results);
  } finally {
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    await db.close();
    if (engine) engine.stop();
    else if (KEEP || REUSE) log(`kept database ${dbName}`);
    else await admin(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
