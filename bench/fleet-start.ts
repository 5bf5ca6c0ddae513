/**
 * A fleet's cold start: N `meter start` at once on a NEW database (no `meter migrate` first, as
 * an orchestrator rolls out sidecars), R rounds. Every process must come up and stay up, all in
 * the same mode; prints each round's modes and the schema the database ended with.
 *
 *   npm run build && BENCH_DATABASE_URL=postgres://…:5433/postgres npx tsx bench/fleet-start.ts [--processes 3] [--rounds 5]
 *
 * Each round's database `meter_bench_…` is created next to BENCH_DATABASE_URL and dropped after.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { packageRoot } from '../src/paths.js';
import { numberFlag } from './args.js';
import { createBenchDatabase, dropBenchDatabase, log } from './seed.js';

const PROCESSES = numberFlag('processes', 3);
const ROUNDS = numberFlag('rounds', 5);

interface Sidecar {
  child: ChildProcess;
  dir: string;
  stderr: string;
  up: Promise<boolean>;
}

function startSidecar(databaseUrl: string): Sidecar {
  const dir = mkdtempSync(join(tmpdir(), 'meter-fleet-'));
  const child = spawn(process.execPath, [join(packageRoot, 'dist/cli/main.js'), 'start'], {
    env: { ...process.env, DATABASE_URL: databaseUrl, METER_PORT: '0', METER_DATA_DIR: dir, METER_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const s: Sidecar = { child, dir, stderr: '', up: Promise.resolve(false) };
  child.stderr!.on('data', (d: Buffer) => (s.stderr += d.toString()));
  s.up = new Promise((resolve) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (/listening on/.test(out)) resolve(true);
    });
    child.once('exit', () => resolve(false));
  });
  return s;
}

async function schemaOf(url: string): Promise<string> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const { rows } = await c.query<{ kind: string }>(
      `SELECT CASE WHEN to_regclass('usage_events') IS NULL THEN 'none'
        WHEN EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'timescaledb')
          AND EXISTS (SELECT 1 FROM timescaledb_information.hypertables WHERE hypertable_name = 'usage_events')
        THEN 'timescale' ELSE 'postgres' END AS kind`,
    );
    return rows[0]!.kind;
  } finally {
    await c.end();
  }
}

let failures = 0;
for (let round = 1; round <= ROUNDS; round++) {
  const { name, url } = await createBenchDatabase();
  const fleet = Array.from({ length: PROCESSES }, () => startSidecar(url));
  const up = await Promise.all(fleet.map((s) => s.up));
  await new Promise((r) => setTimeout(r, 2_000)); // one that exits right after coming up is down
  const alive = fleet.map((s) => s.child.exitCode === null && s.child.signalCode === null);
  const modes = fleet.map((s) => /"store":"(\w+)"/.exec(s.stderr)?.[1] ?? 'none');
  const schema = await schemaOf(url);
  const ok = up.every(Boolean) && alive.every(Boolean) && modes.every((m) => m === schema);
  if (!ok) failures++;
  log(`round ${round}: ${alive.filter(Boolean).length} of ${PROCESSES} up, modes ${modes.join(' ')}, schema ${schema}`);
  for (const s of fleet.filter((_, i) => !alive[i])) log(`an exited sidecar said:\n${s.stderr.slice(-1_000)}`);
  for (const s of fleet) {
    if (s.child.exitCode === null) {
      const exited = new Promise((r) => s.child.once('exit', r));
      s.child.kill('SIGTERM');
      await exited;
    }
    rmSync(s.dir, { recursive: true, force: true });
  }
  await dropBenchDatabase(name);
}
console.log(
  failures
    ? `${failures} of ${ROUNDS} rounds had a sidecar down or in another mode`
    : `${ROUNDS} of ${ROUNDS} rounds: ${PROCESSES} of ${PROCESSES} sidecars up, one mode`,
);
process.exit(failures ? 1 : 0);
