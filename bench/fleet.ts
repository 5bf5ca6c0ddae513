/**
 * The fleet's cost on one database (docs/fleet.md "Cost on the database"): N full daemons in this
 * process, each with its own connection pool, on one PostgreSQL database holding A accounts (half
 * Free, half Pro; a tenth of them with a hard-capped budget). Two phases of S seconds: idle (no
 * calls), then busy (a few sidecars each sending calls for its own accounts to a fake provider).
 * Reports, per phase: statements a second (transactions committed, as PostgreSQL counts them),
 * the database's CPU (all its processes, from /proc, with the backends that ended meanwhile) and
 * its connections (mean and peak of a sample every 250 ms). The daemons run with their defaults
 * (METER_DB_POOL_MAX 10, METER_DB_IDLE_MS 1 s, METER_KEY_REFRESH_MS 2 s).
 *
 *   npm run bench:fleet -- [--sidecars 100] [--accounts 10000] [--seconds 20] [--busy 10] [--rate 20] [--pooler-port P]
 *
 * --pooler-port: the sidecars connect through a pooler on this port of the same host (PgBouncer in
 * session mode, docs/fleet.md) instead of straight to PostgreSQL.
 *
 * PostgreSQL: BENCH_DATABASE_URL, else METER_TEST_DATABASE_URL, else postgres://root@127.0.0.1:5432/test
 * (a database `meter_bench_fleet_…` is created next to it and dropped at the end). Run it on the
 * machine that runs PostgreSQL (the CPU is read from /proc).
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { loadConfig } from '../src/config.js';
import { components } from '../src/server/components.js';
import { startDaemon, type Daemon } from '../src/server/daemon.js';
import { migrate } from '../src/store/migrate.js';
import { postgresCpuMicros } from './processes.js';
import { openPostgres } from '../src/store/postgres.js';
import { numberFlag } from './args.js';

const SIDECARS = numberFlag('sidecars', 100);
const ACCOUNTS = numberFlag('accounts', 10_000);
const SECONDS = numberFlag('seconds', 20);
const BUSY = numberFlag('busy', 10);
const RATE = numberFlag('rate', 20);
const POOLER_PORT = numberFlag('pooler-port', 0);

const base =
  process.env.BENCH_DATABASE_URL ?? process.env.METER_TEST_DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test';
const name = `meter_bench_fleet_${randomBytes(4).toString('hex')}`;
const url = Object.assign(new URL(base), { pathname: `/${name}` }).toString();
const admin = openPostgres(base, { max: 1 });
await admin.query(`CREATE DATABASE ${name}`);
const db = openPostgres(url, { max: 2 });

try {
  await migrate(db);
  // Accounts, one key each (its secret is never used: calls authenticate with a known key below).
  await db.query(
    `INSERT INTO accounts (name, plan) SELECT 'acct' || i, CASE WHEN i % 2 = 0 THEN 'pro' ELSE 'free' END
       FROM generate_series(1, $1) AS i`,
    [ACCOUNTS],
  );
  await db.query(
    `INSERT INTO budgets (account_id, monthly_usd, hard_cap)
     SELECT id, 1000, true FROM accounts WHERE plan = 'pro' AND (substr(name, 5)::int % 10) = 0`,
  );
  const { createKey } = await import('../src/auth/keys.js');
  const keys: string[] = [];
  for (let i = 1; i <= SIDECARS * 10 && i <= ACCOUNTS; i++) keys.push((await createKey(db, `acct${i}`)).key);

  const upstream = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'c',
          object: 'chat.completion',
          model: 'gpt-4o-mini',
          choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
        }),
      );
    });
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const origin = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;

  const daemons: Daemon[] = [];
  for (let i = 0; i < SIDECARS; i++) {
    const config = loadConfig({
      METER_PORT: '0',
      METER_DATA_DIR: `/tmp/${name}-${i}`,
      DATABASE_URL: POOLER_PORT ? Object.assign(new URL(url), { port: String(POOLER_PORT) }).toString() : url,
      METER_UPSTREAM_OPENAI: `${origin}/v1`,
    });
    daemons.push(await startDaemon(config, pino({ level: 'silent' }), components));
  }
  console.log(`${SIDECARS} sidecars up on ${ACCOUNTS} accounts`);

  const idle = await measure(SECONDS);
  report('idle', idle);

  // Busy: BUSY sidecars, each calling at RATE a second for its own ten accounts.
  let running = true;
  const loops = daemons.slice(0, BUSY).map(async (d, i) => {
    let n = 0;
    while (running) {
      const key = keys[(i * 10 + (n++ % 10)) % keys.length]!;
      const res = await fetch(`${d.url}/proxy/openai/v1/chat/completions`, {
        method: 'POST',
        headers: { 'x-meter-key': key, authorization: 'Bearer sk', 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt-4o-mini', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] }),
      });
      await res.arrayBuffer();
      await sleep(1000 / RATE);
    }
  });
  const busy = await measure(SECONDS);
  running = false;
  await Promise.all(loops);
  report(`busy (${BUSY} sidecars × ${RATE} calls/s)`, busy);

  for (const d of daemons) await d.close();
  upstream.close();
} finally {
  await db.close();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.close();
}

interface Phase {
  statementsPerSecond: number;
  dbCores: number;
  meanConnections: number;
  peakConnections: number;
}

async function measure(seconds: number): Promise<Phase> {
  const commits = async () =>
    Number(
      (
        await admin.query<{ n: string }>(
          'SELECT (xact_commit + xact_rollback)::text AS n FROM pg_stat_database WHERE datname = $1',
          [name],
        )
      )[0]!.n,
    );
  const c0 = await commits();
  const cpu0 = postgresCpuMicros() / 1e6;
  const t0 = Date.now();
  let peak = 0;
  let sum = 0;
  let samples = 0;
  while (Date.now() - t0 < seconds * 1000) {
    const [row] = await admin.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1',
      [name],
    );
    peak = Math.max(peak, row!.n);
    sum += row!.n;
    samples++;
    await sleep(250);
  }
  const wall = (Date.now() - t0) / 1000;
  return {
    statementsPerSecond: ((await commits()) - c0) / wall,
    dbCores: (postgresCpuMicros() / 1e6 - cpu0) / wall,
    meanConnections: sum / samples,
    peakConnections: peak,
  };
}

function report(phase: string, p: Phase): void {
  console.log(
    `${phase}: ${p.statementsPerSecond.toFixed(0)} statements/s, database CPU ${p.dbCores.toFixed(2)} cores, ` +
      `${p.meanConnections.toFixed(0)} connections (${p.peakConnections} at peak)`,
  );
}
