/**
 * Analytics latency at scale on PostgreSQL: seeds a throwaway database with N usage events
 * (generate_series, with their rollups), serves the analytics component on a loopback port and
 * reports p50 / p99 of each endpoint over HTTP. Target: p50 < 10 ms at 5M events.
 *
 *   npm run bench:analytics -- [--events 5000000] [--requests 300] [--keep] [--timescale | --engine]
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
import pg from 'pg';
import { createAnalytics } from '../src/analytics/index.js';
import type { Authenticator, Principal } from '../src/auth/types.js';
import { migrate } from '../src/store/migrate.js';
import { runRetention } from '../src/plans/retention.js';
import { openPostgres } from '../src/store/postgres.js';
import { refreshAggregates } from '../src/store/timescale/maintenance.js';
import { ensureTimescale, inTimescaleMode } from '../src/store/timescale/mode.js';
import type { Db } from '../src/store/types.js';

const args = process.argv.slice(2);
const flag = (name: string, fallback: number) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const EVENTS = flag('events', Number(process.env.BENCH_EVENTS ?? 5_000_000));
const REQUESTS = flag('requests', 300);
const KEEP = args.includes('--keep');
const ENGINE = args.includes('--engine');
const TIMESCALE = ENGINE || args.includes('--timescale');
const ACCOUNTS = 20;
const CHUNK = 500_000;
const baseUrl = process.env.BENCH_DATABASE_URL ?? process.env.METER_TEST_DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test';

const log = (msg: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${msg}\n`);

async function admin(sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: baseUrl });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

const MODELS: [string, string][] = [
  ['openai', 'gpt-4o'], ['openai', 'gpt-4o-mini'], ['anthropic', 'claude-sonnet-4'], ['anthropic', 'claude-haiku-4'],
  ['groq', 'llama-3.3-70b'], ['gemini', 'gemini-2.5-flash'], ['mistral', 'mistral-large'], ['deepseek', 'deepseek-chat'],
];

/** Events g in [lo, hi): even g to the heavy account, the rest round-robin; times spread over
 *  the last 90 days; tags: team (70%, 13 values), env (67%, 2), feature (29%, 50). */
const EVENTS_SQL = `
INSERT INTO usage_events (time, event_id, account_id, key_id, provider, model, requested_model, status,
  input_tokens, output_tokens, cost, price_version, usage_source, latency_ms, ttfb_ms, stream, tags)
SELECT now() - random() * interval '90 days', gen_random_uuid(),
  ($1::uuid[])[CASE WHEN g % 2 = 0 THEN 1 ELSE 2 + (g / 2) % (cardinality($1::uuid[]) - 1) END],
  'bench0000000', ($2::text[])[1 + g % 8], ($3::text[])[1 + g % 8], ($3::text[])[1 + g % 8], 200,
  (random() * 4000)::int, (random() * 800)::int, round((random() * 0.05)::numeric, 8),
  'bench', 'provider', 100 + random() * 900, 50, g % 3 = 0,
  jsonb_strip_nulls(jsonb_build_object(
    'team', CASE WHEN g % 10 < 7 THEN 't' || (g % 13) END,
    'env', CASE g % 3 WHEN 0 THEN 'prod' WHEN 1 THEN 'staging' END,
    'feature', CASE WHEN g % 7 < 2 THEN 'f' || (g % 50) END))
FROM generate_series($4::bigint, $5::bigint - 1) AS g`;

const DAILY_ROLLUP_SQL = `
INSERT INTO usage_daily (account_id, day, provider, model, spend, requests, input_tokens, output_tokens,
  cached_input_tokens, cache_write_tokens, reasoning_tokens)
SELECT account_id, (time AT TIME ZONE 'UTC')::date, provider, model, sum(cost), count(*),
  sum(input_tokens), sum(output_tokens), sum(cached_input_tokens), sum(cache_write_tokens), sum(reasoning_tokens)
FROM usage_events GROUP BY 1, 2, 3, 4`;

const TAG_ROLLUP_SQL = `
INSERT INTO usage_tag_daily (account_id, day, tag_key, tag_value, spend, requests)
SELECT e.account_id, (e.time AT TIME ZONE 'UTC')::date, t.key, t.value, sum(e.cost), count(*)
FROM usage_events e CROSS JOIN LATERAL jsonb_each_text(e.tags) AS t(key, value) GROUP BY 1, 2, 3, 4`;

/** The test engine in a child process; its URL and how to stop it. */
async function startEngine(): Promise<{ url: string; stop(): void }> {
  const child = fork(fileURLToPath(new URL('../test/helpers/timescale-engine.mjs', import.meta.url)), { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const reply = (pred: (m: { ready?: boolean; id?: number; port?: number }) => boolean) =>
    new Promise<{ port?: number }>((resolve) => child.on('message', (m: { ready?: boolean; id?: number; port?: number }) => pred(m) && resolve(m)));
  await reply((m) => m.ready === true);
  child.send({ op: 'open', id: 1 });
  const { port } = await reply((m) => m.id === 1);
  return { url: `postgres://postgres@127.0.0.1:${port}/postgres`, stop: () => child.kill() };
}

async function seed(db: Db): Promise<string[]> {
  const accounts: string[] = [];
  for (let i = 0; i < ACCOUNTS; i++) {
    const [row] = await db.query<{ id: string }>(`INSERT INTO accounts (name, plan) VALUES ($1, 'pro') RETURNING id`, [`bench-${i}`]);
    accounts.push(row!.id);
  }
  // Loading without the secondary indexes and building them afterwards is several times faster.
  const indexes = await db.query<{ indexname: string; indexdef: string }>(
    `SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'usage_events' AND indexname <> 'usage_events_pkey'`,
  );
  for (const ix of indexes) await db.exec(`DROP INDEX ${ix.indexname}`);
  for (let lo = 0; lo < EVENTS; lo += CHUNK) {
    const hi = Math.min(EVENTS, lo + CHUNK);
    await db.query(EVENTS_SQL, [accounts, MODELS.map((m) => m[0]), MODELS.map((m) => m[1]), lo, hi]);
    log(`events ${hi.toLocaleString('en')} / ${EVENTS.toLocaleString('en')}`);
  }
  if (TIMESCALE) {
    await refreshAggregates(db, { from: new Date(Date.now() - 91 * 86_400_000) });
    log('continuous aggregates refreshed');
  } else {
    await db.exec(DAILY_ROLLUP_SQL);
    await db.exec(TAG_ROLLUP_SQL);
    log('rollups built');
  }
  await db.withAdvisoryLock('bench.indexes', async (conn) => {
    await conn.exec(`SET maintenance_work_mem = '512MB'`);
    for (const ix of indexes) {
      await conn.exec(ix.indexdef);
      log(`index ${ix.indexname}`);
    }
  });
  if (TIMESCALE) {
    const { timescale } = (await runRetention(db))!;
    log(`compressed ${timescale!.compressedChunks} chunks`);
  }
  await db.exec('VACUUM ANALYZE');
  return accounts;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

async function main(): Promise<void> {
  const dbName = ENGINE ? 'the test engine' : `meter_bench_${randomBytes(4).toString('hex')}`;
  const engine = ENGINE ? await startEngine() : undefined;
  if (!engine) await admin(`CREATE DATABASE ${dbName}`);
  const url = new URL(engine?.url ?? baseUrl);
  if (!engine) url.pathname = `/${dbName}`;
  const plain = openPostgres(url.toString(), { max: engine ? 1 : 10 });
  const db = TIMESCALE ? inTimescaleMode(plain) : plain;
  const started = performance.now();
  let server: ReturnType<typeof createServer> | undefined;
  try {
    if (TIMESCALE) await ensureTimescale(db);
    await migrate(db);
    log(`seeding ${EVENTS.toLocaleString('en')} events into ${dbName}`);
    const accounts = await seed(db);
    const [sizes] = await db.query<{ events: string; daily: string; tags: string; size: string }>(`SELECT
      (SELECT count(*) FROM usage_events) AS events, (SELECT count(*) FROM usage_daily) AS daily,
      (SELECT count(*) FROM usage_tag_daily) AS tags, pg_size_pretty(pg_database_size(current_database())) AS size`);
    log(`mode: ${db.kind}${TIMESCALE ? ` (TimescaleDB ${(await db.query<{ v: string }>(`SELECT extversion AS v FROM pg_extension WHERE extname = 'timescaledb'`))[0]?.v})` : ''}`);
    log(`seeded in ${((performance.now() - started) / 1000).toFixed(0)} s: ${JSON.stringify(sizes)}`);

    // Bench only: one fixed key for the heavy account.
    const principal: Principal = { keyId: 'bench0000000', accountId: accounts[0]!, accountName: 'bench-0', plan: 'pro' };
    const key = `mk_bench0000000_${randomBytes(16).toString('hex')}`;
    const auth: Authenticator = { authenticate: (h) => (h.authorization === `Bearer ${key}` ? principal : undefined) };
    const handler = createAnalytics({ store: db, authenticator: auth, retentionVisibility: db.kind === 'timescale' }).routes!['/analytics/']!;
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
      cursor = (JSON.parse(await get(`/analytics/events?limit=500${cursor ? `&cursor=${cursor}` : ''}`)) as { next_cursor: string | null }).next_cursor;
      if (!cursor) break;
      cursors.push(cursor);
    }
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
      ['events?from=…&to=… (one day)', () => {
        const day = new Date(Date.now() - 30 * 86_400_000).toISOString().slice(0, 10);
        return `/analytics/events?from=${day}&to=${day}T23:59:59Z`;
      }],
    ];
    const results: { endpoint: string; p50: string; p99: string; max: string }[] = [];
    for (const [name, path] of endpoints) {
      for (let i = 0; i < 20; i++) await get(path(i)); // warm caches and connections
      const times: number[] = [];
      for (let i = 0; i < REQUESTS; i++) {
        const t0 = performance.now();
        await get(path(i));
        times.push(performance.now() - t0);
      }
      times.sort((a, b) => a - b);
      const ms = (v: number) => v.toFixed(2);
      results.push({ endpoint: name, p50: ms(percentile(times, 50)), p99: ms(percentile(times, 99)), max: ms(times[times.length - 1]!) });
      log(`${name}: p50 ${ms(percentile(times, 50))} ms`);
    }
    console.log(`\nanalytics on ${ENGINE ? 'the TimescaleDB test engine (WASM)' : TIMESCALE ? 'TimescaleDB' : 'PostgreSQL'}, ${EVENTS.toLocaleString('en')} events (${sizes!.daily} daily rows, ${sizes!.tags} tag rows, ${sizes!.size}); `
      + `heavy account holds half; ${REQUESTS} sequential requests each over HTTP (ms)\n`);
    console.table(results);
  } finally {
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    await db.close();
    if (engine) engine.stop();
    else if (KEEP) log(`kept database ${dbName}`);
    else await admin(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
