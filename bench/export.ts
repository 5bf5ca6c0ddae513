/**
 * `meter export` at scale: N events (default 1,000,000) made by PostgreSQL itself in a
 * throwaway database, then the built CLI exports the month as CSV and as FOCUS to /dev/null
 * while this samples its RSS (/proc, every 20 ms). Prints rows, bytes, time and RSS above the
 * command's idle RSS (measured by `meter export` of an empty range).
 *
 *   BENCH_DATABASE_URL=postgres://…/<throwaway database> npm run build && node dist/bench/export.js [--events 1000000]
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createAccount } from '../src/auth/accounts.js';
import { packageRoot } from '../src/paths.js';
import { openStore } from '../src/store/index.js';
import { numberFlag } from './args.js';
import { rssMb } from './processes.js';

const EVENTS = numberFlag('events', 1_000_000);
const DATABASE_URL = process.env.BENCH_DATABASE_URL;
if (!DATABASE_URL) throw new Error('BENCH_DATABASE_URL must name a throwaway PostgreSQL database');

async function exportRun(args: string[]): Promise<{ seconds: number; peakMb: number; bytes: number }> {
  const t0 = performance.now();
  const child = spawn(process.execPath, [join(packageRoot, 'dist/cli/main.js'), 'export', ...args], {
    env: { ...process.env, DATABASE_URL, METER_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let bytes = 0;
  child.stdout.on('data', (d: Buffer) => (bytes += d.length));
  let peakMb = 0;
  const sampler = setInterval(() => {
    try {
      const mb = rssMb(child.pid!);
      if (Number.isFinite(mb)) peakMb = Math.max(peakMb, mb); // an exited child reads as NaN
    } catch {
      // exited between samples
    }
  }, 20);
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  clearInterval(sampler);
  if (code !== 0) throw new Error(`meter export exited ${code}`);
  return { seconds: (performance.now() - t0) / 1000, peakMb, bytes };
}

const store = await openStore({ databaseUrl: DATABASE_URL, dataDir: '/nonexistent' });
const account = `bulk-${Date.now()}`;
await createAccount(store, account, 'pro');
const [row] = await store.query<{ id: string }>('SELECT id FROM accounts WHERE name = $1', [account]);
process.stderr.write(`seeding ${EVENTS} events…\n`);
// Spread over March 2026 (at most a month of seconds between them).
const step = Math.max(1, Math.floor(((31 * 86_400) / EVENTS) * 1000)) / 1000;
for (let start = 0; start < EVENTS; start += 250_000) {
  await store.query(
    `INSERT INTO usage_events (time, event_id, account_id, key_id, provider, model, requested_model, status,
       input_tokens, output_tokens, cached_input_tokens, cost, price_version, usage_source, latency_ms, stream, tags)
     SELECT timestamptz '2026-03-01T00:00:00Z' + (i * $4::float8 * interval '1 second'), gen_random_uuid(), $1, 'key' || (i % 7),
       'openai', CASE WHEN i % 3 = 0 THEN 'gpt-4o' ELSE 'gpt-4o-mini' END, 'gpt-4o-mini', 200, 1000 + i % 500, 200 + i % 90, i % 300,
       ((1000 + i % 500) * 15 + (200 + i % 90) * 60)::numeric / 100000000, 'genai-prices@0.1.8', 'provider', 120.5, false,
       jsonb_build_object('team', 'team-' || (i % 13), 'env', 'prod')
     FROM generate_series($2::int, $3::int) AS i`,
    [row!.id, start, Math.min(EVENTS, start + 250_000) - 1, step],
  );
}
await store.query('ANALYZE usage_events');
await store.close();

const base = ['--account', account, '--from', '2026-03-01', '--to', '2026-04-01'];
const idle = await exportRun(['--account', account, '--from', '2020-01-01', '--to', '2020-01-02', '--format', 'csv']);
process.stdout.write(`meter export of an empty range: peak RSS ${idle.peakMb.toFixed(0)} MB\n`);
for (const format of ['csv', 'focus']) {
  const r = await exportRun([...base, '--format', format]);
  process.stdout.write(
    `meter export --format ${format}, ${EVENTS.toLocaleString('en-US')} events: ${(r.bytes / 1e6).toFixed(0)} MB in ` +
      `${r.seconds.toFixed(1)} s (${Math.round(EVENTS / r.seconds).toLocaleString('en-US')} events/s); ` +
      `peak RSS ${r.peakMb.toFixed(0)} MB (+${(r.peakMb - idle.peakMb).toFixed(0)} MB over the empty export)\n`,
  );
}
