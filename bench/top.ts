/**
 * What `meter top` costs on a large, busy store: seeds a throwaway PostgreSQL database with N
 * events (bench/seed.ts) plus the last hour of the measured account at R calls/s, keeps writing
 * R calls/s through the writer's own batch statement (with its rollups), and meanwhile
 *  - runs the built `meter top` live in a tmux pseudo-terminal (80×24) and reads its CPU time
 *    and RSS from /proc over the measurement;
 *  - times the data module's refreshes in this process (every statement of one refresh).
 *
 *   npm run build && npm run bench:top -- [--events 5000000] [--rate 200] [--seconds 60] [--keep]
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { TopData } from '../cli/top/data.js';
import { percentile } from '../cli/top/derive.js';
import { sourceFromDb } from '../cli/top-source.js';
import type { UsageEvent } from '../src/metering/event.js';
import { packageRoot } from '../src/paths.js';
import { insertBatch } from '../src/store/event-batch.js';
import { migrate } from '../src/store/migrate.js';
import { openPostgres } from '../src/store/postgres.js';
import { createBenchDatabase, dropBenchDatabase, log, MODELS, seed } from './seed.js';
import { hasFlag, numberFlag } from './args.js';

const EVENTS = numberFlag('events', 5_000_000);
const RATE = numberFlag('rate', 200);
const SECONDS = numberFlag('seconds', 60);
const KEEP = hasFlag('keep');
const run = promisify(execFile);
const tmux = async (...a: string[]) => (await run('tmux', ['-L', 'meter-bench-top', ...a])).stdout.trim();

/** The last hour of the heavy account at RATE calls/s, recorded when they arrived. */
const RECENT_SQL = `
INSERT INTO usage_events (time, recorded_at, event_id, account_id, key_id, provider, model, status,
  input_tokens, output_tokens, cost, price_version, usage_source, latency_ms, stream, tags)
SELECT t, t, gen_random_uuid(), $1::uuid, 'bench0000000', ($2::text[])[1 + g % 8], ($3::text[])[1 + g % 8],
  CASE WHEN g % 50 = 0 THEN 429 ELSE 200 END, 1000, 200, round((random() * 0.01)::numeric, 8), 'bench',
  CASE WHEN g % 20 = 0 THEN 'estimated' ELSE 'provider' END, 200 + random() * 3000, false,
  jsonb_build_object('team', 't' || (g % 13), 'env', 'prod')
FROM generate_series(1, $4::int) AS g, LATERAL (SELECT now() - (g::float8 / $5::int) * interval '1 second' AS t) AS r`;

const cpuTicks = (pid: number) => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return Number(fields[11]) + Number(fields[12]); // utime + stime
};
const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

async function main(): Promise<void> {
  const { name, url } = await createBenchDatabase();
  const db = openPostgres(url);
  try {
    await migrate(db);
    log(`seeding ${EVENTS.toLocaleString('en')} events + the last hour at ${RATE}/s into ${name}`);
    const accounts = await seed(db, EVENTS, {
      extra: (ids) =>
        db
          .query(RECENT_SQL, [ids[0], MODELS.map((m) => m[0]), MODELS.map((m) => m[1]), RATE * 3600, RATE])
          .then(() => {}),
    });
    const heavy = accounts[0]!;
    const [{ n } = { n: '?' }] = await db.query<{ n: string }>('SELECT count(*) AS n FROM usage_events');
    log(`seeded: ${n} events`);

    // RATE calls/s through the writer's statement, in batches of RATE/10 every 100 ms.
    let writing = true;
    let written = 0;
    const writer = (async () => {
      while (writing) {
        const t0 = performance.now();
        const now = new Date().toISOString();
        const batch: UsageEvent[] = Array.from(
          { length: RATE / 10 },
          (_, i) =>
            ({
              id: randomUUID(),
              time: now,
              accountId: heavy,
              keyId: 'bench0000000',
              provider: 'openai',
              model: MODELS[i % 2]![1],
              requestedModel: null,
              status: i % 50 === 0 ? 500 : 200,
              inputTokens: 1000,
              outputTokens: 200,
              cachedInputTokens: 0,
              cacheWriteTokens: 0,
              reasoningTokens: 0,
              cost: '0.00123456',
              unpriced: false,
              priceVersion: 'bench',
              usageSource: 'provider',
              latencyMs: 300 + i * 10,
              ttfbMs: 50,
              stream: false,
              tags: { team: `t${i % 13}` },
              providerCostTicks: null,
            }) as UsageEvent,
        );
        await insertBatch(db, batch);
        written += batch.length;
        await new Promise((r) => setTimeout(r, Math.max(0, 100 - (performance.now() - t0))));
      }
    })();

    // The built CLI, live in a pseudo-terminal; `exec` makes the pane's process meter top itself.
    await tmux('kill-server').catch(() => {});
    await tmux(
      'new-session',
      '-d',
      '-s',
      'top',
      '-x',
      '80',
      '-y',
      '24',
      '-c',
      packageRoot,
      `exec env DATABASE_URL='${url}' METER_LOG_LEVEL=silent node dist/cli/main.js top --account bench-0`,
    );
    const pid = Number(await tmux('display', '-p', '-t', 'top', '#{pane_pid}'));
    const tStart = performance.now();
    while (!(await tmux('capture-pane', '-p', '-t', 'top')).includes('meter top'))
      await new Promise((r) => setTimeout(r, 200));
    log(
      `meter top drew its first frame after ${((performance.now() - tStart) / 1000).toFixed(1)} s (start: the hour per minute, the recent events)`,
    );
    await new Promise((r) => setTimeout(r, 5_000));

    // The same refreshes in this process, timed, while the CLI's CPU is measured.
    const data = new TopData(sourceFromDb(db), { account: 'bench-0', intervalS: 1 });
    const s0 = performance.now();
    await data.start();
    const startMs = performance.now() - s0;
    const ticks0 = cpuTicks(pid);
    const w0 = written;
    const t0 = performance.now();
    const times: number[] = [];
    while (performance.now() - t0 < SECONDS * 1000) {
      const r0 = performance.now();
      await data.refresh();
      times.push(performance.now() - r0);
      await new Promise((r) => setTimeout(r, Math.max(0, 1000 - (performance.now() - r0))));
    }
    const elapsed = (performance.now() - t0) / 1000;
    const cpu = (cpuTicks(pid) - ticks0) / 100 / elapsed; // USER_HZ = 100
    const rss = rssMb(pid);
    const screen = await tmux('capture-pane', '-p', '-t', 'top');
    writing = false;
    await writer;
    await tmux('send-keys', '-t', 'top', 'q');
    times.sort((a, b) => a - b);
    console.log(
      `\nmeter top on PostgreSQL: ${n} events, the account writing ${((written - w0) / elapsed).toFixed(0)} calls/s`,
    );
    console.table({
      'meter top CPU (% of one core)': (cpu * 100).toFixed(1),
      'meter top RSS (MB)': rss.toFixed(0),
      'start (hour per minute + recent events), ms': startMs.toFixed(0),
      'refresh p50, ms': percentile(times, 50)!.toFixed(1),
      'refresh p95, ms': percentile(times, 95)!.toFixed(1),
      refreshes: times.length,
    });
    console.log(screen);
  } finally {
    await tmux('kill-server').catch(() => {});
    await db.close();
    if (KEEP) log(`kept database ${name}`);
    else await dropBenchDatabase(name);
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
