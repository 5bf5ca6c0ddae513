/**
 * Seeding for the benchmarks that need a large store: a throwaway PostgreSQL database with N usage
 * events (generate_series) and their rollups. Half of the events belong to one heavy account
 * (`bench-0`, the one measured); the rest is spread over 19 others, so every query has to skip
 * other accounts' rows. recorded_at is the event's time, as if each call had been written when it
 * arrived.
 *
 * PostgreSQL: BENCH_DATABASE_URL, else METER_TEST_DATABASE_URL, else postgres://root@127.0.0.1:5432/test
 * (a database `meter_bench_…` is created next to it).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { runRetention } from '../src/plans/retention.js';
import { refreshAggregates } from '../src/store/timescale/maintenance.js';
import type { Db } from '../src/store/types.js';

const ACCOUNTS = 20;
const CHUNK = 500_000;
export const baseUrl =
  process.env.BENCH_DATABASE_URL ?? process.env.METER_TEST_DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test';

export const log = (msg: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${msg}\n`);

export async function admin(sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: baseUrl });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

export const MODELS: [string, string][] = [
  ['openai', 'gpt-4o'],
  ['openai', 'gpt-4o-mini'],
  ['anthropic', 'claude-sonnet-4'],
  ['anthropic', 'claude-haiku-4'],
  ['groq', 'llama-3.3-70b'],
  ['gemini', 'gemini-2.5-flash'],
  ['mistral', 'mistral-large'],
  ['deepseek', 'deepseek-chat'],
];

/** Events g in [lo, hi): even g to the heavy account, the rest round-robin; times spread over
 *  the last 90 days; tags: team (70%, 13 values), env (67%, 2), feature (29%, 50), and a rare
 *  one, job=nightly (1 event in 20,000, all the heavy account's). */
const EVENTS_SQL = `
INSERT INTO usage_events (time, recorded_at, event_id, account_id, key_id, provider, model, requested_model, status,
  input_tokens, output_tokens, cost, price_version, usage_source, latency_ms, ttfb_ms, stream, tags)
SELECT t, t, gen_random_uuid(),
  ($1::uuid[])[CASE WHEN g % 2 = 0 THEN 1 ELSE 2 + (g / 2) % (cardinality($1::uuid[]) - 1) END],
  'bench0000000', ($2::text[])[1 + g % 8], ($3::text[])[1 + g % 8], ($3::text[])[1 + g % 8], 200,
  (random() * 4000)::int, (random() * 800)::int, round((random() * 0.05)::numeric, 8),
  'bench', 'provider', 100 + random() * 900, 50, g % 3 = 0,
  jsonb_strip_nulls(jsonb_build_object(
    'team', CASE WHEN g % 10 < 7 THEN 't' || (g % 13) END,
    'env', CASE g % 3 WHEN 0 THEN 'prod' WHEN 1 THEN 'staging' END,
    'feature', CASE WHEN g % 7 < 2 THEN 'f' || (g % 50) END,
    'job', CASE WHEN g % 20000 = 0 THEN 'nightly' END))
FROM generate_series($4::bigint, $5::bigint - 1) AS g,
  -- WHERE g …: a LATERAL that does not reference g is computed once, giving every event one time.
  LATERAL (SELECT now() - random() * interval '90 days' AS t WHERE g IS NOT NULL) AS r`;

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

/** Seeds `events` events over the last 90 days and their rollups (continuous aggregates in
 *  TimescaleDB mode); `extra` adds more events before the rollups and indexes are built. */
export async function seed(
  db: Db,
  events: number,
  opts: { timescale?: boolean; extra?: (accounts: string[]) => Promise<void> } = {},
): Promise<string[]> {
  const accounts: string[] = [];
  for (let i = 0; i < ACCOUNTS; i++) {
    const [row] = await db.query<{ id: string }>(`INSERT INTO accounts (name, plan) VALUES ($1, 'pro') RETURNING id`, [
      `bench-${i}`,
    ]);
    accounts.push(row!.id);
  }
  // Loading without the secondary indexes and building them afterwards is several times faster.
  const indexes = await db.query<{ indexname: string; indexdef: string }>(
    `SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'usage_events' AND indexname <> 'usage_events_pkey'`,
  );
  for (const ix of indexes) await db.exec(`DROP INDEX ${ix.indexname}`);
  for (let lo = 0; lo < events; lo += CHUNK) {
    const hi = Math.min(events, lo + CHUNK);
    await db.query(EVENTS_SQL, [accounts, MODELS.map((m) => m[0]), MODELS.map((m) => m[1]), lo, hi]);
    log(`events ${hi.toLocaleString('en')} / ${events.toLocaleString('en')}`);
  }
  await opts.extra?.(accounts);
  if (opts.timescale) {
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
  if (opts.timescale) {
    const { timescale } = (await runRetention(db))!;
    log(`compressed ${timescale!.compressedChunks} chunks`);
  }
  await db.exec('VACUUM ANALYZE');
  return accounts;
}

/** A fresh database next to baseUrl; returns its name and URL. */
export async function createBenchDatabase(): Promise<{ name: string; url: string }> {
  const name = `meter_bench_${randomBytes(4).toString('hex')}`;
  await admin(`CREATE DATABASE ${name}`);
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  return { name, url: url.toString() };
}

export const dropBenchDatabase = (name: string) => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
