/**
 * What the daemon adds to a call, against two floors: a mock provider (its own process, loopback)
 * called directly, through the smallest Node + undici pass-through that reads usage (the bare
 * pass-through, bench/minimal-passthrough.ts), through the same pass-through writing one row per
 * call to PostgreSQL every 200 ms (the floor that writes; PostgreSQL only) and through
 * `meter start` as shipped (metering, spool, writer, rate limit and key checks on), interleaved
 * call by call in one run so that all see the same machine. Everything runs from dist/
 * (`npm run bench` builds first).
 *
 *   npm run bench -- [--quick] [--c1 3000] [--streams 1000] [--c64-seconds 2] [--c64-slices 4] [--rounds 3]
 *                    [--soak-seconds 600] [--startup-runs 3] [--proxy-alone] [--otel] [--control]
 *                    [--json FILE] [--budgets 10]
 *
 * BENCH_DATABASE_URL=postgres://…/<throwaway database>: the daemon on PostgreSQL, else on the
 * embedded store in a throwaway data dir. BENCH_DAEMON_ARGS: node flags for the daemon only
 * (e.g. --cpu-prof). --proxy-alone adds the daemon without metering (bench/proxy-daemon.ts;
 * PostgreSQL only). --otel adds a second meter with OpenTelemetry export on (OTLP/HTTP to a
 * collector stand-in in this process that answers 200 at once). --control adds a second meter,
 * the same build and settings in its own process (PostgreSQL only): what two identical daemons
 * differ by in one run is the noise a ratio must clear; with BENCH_CONTROL_ROOT=<another checkout,
 * built> the second meter runs that checkout's dist/ instead: an A/B of two versions in one run
 * (both must use the same migrations). --quick: one short round, no
 * start-up runs. --json FILE: the summary's figures as JSON too (to compare runs). --budgets N:
 * N alert budgets on the bench's account, far from their amounts (issue 30: they must cost nothing).
 *
 * Prints, per round and as medians over the rounds, the latency each adds to a direct call
 * (JSON p50/p99 at concurrency 1, a stream's first byte), CPU per call and per stream (every
 * thread of the process, from /proc; and how much of it the process spends idle anyway, measured
 * for 5 s before the rounds), JSON calls and streams per second at concurrency 64 with the CPU
 * per call of the process, of PostgreSQL (on this machine) and of the whole machine meanwhile,
 * and RSS under load, with meter's ratio to each floor; --soak-seconds keeps c=64 on the daemon and reports RSS
 * every minute; then `meter start` on the embedded store to /readyz 200, on a new and an
 * existing data dir.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { createAccount } from '../src/auth/accounts.js';
import { createKey } from '../src/auth/keys.js';
import { createBudget } from '../src/budget/budgets-admin.js';
import { parseScope } from '../src/budget/scope.js';
import { packageRoot } from '../src/paths.js';
import { openStore } from '../src/store/index.js';
import {
  backlogDrained,
  chat,
  flushed,
  idleRates,
  interleaved,
  loaded,
  pct,
  streamTtfb,
  type Call,
  type Name,
  type Target,
} from './measure.js';
import { spawnService, stopService, type Service } from './processes.js';
import { summary, table, type Round } from './report.js';
import { measureStartup, startupRows } from './startup.js';
import { hasFlag, numberFlag, stringFlag } from './args.js';

const QUICK = hasFlag('quick');
const C1_REQUESTS = numberFlag('c1', QUICK ? 1000 : 3000);
const STREAMS = numberFlag('streams', QUICK ? 500 : 1000);
const C64_SECONDS = numberFlag('c64-seconds', QUICK ? 1 : 2);
const C64_SLICES = numberFlag('c64-slices', QUICK ? 2 : 4);
const ROUNDS = numberFlag('rounds', QUICK ? 1 : 3);
const SOAK_SECONDS = numberFlag('soak-seconds', 0);
const STARTUP_RUNS = numberFlag('startup-runs', QUICK ? 0 : 3);
const WITH_PROXY = hasFlag('proxy-alone');
const WITH_OTEL = hasFlag('otel');
const WITH_CONTROL = hasFlag('control');
const JSON_OUT = stringFlag('json');
/** Budgets on the bench's account (alert, far from their amount, of assorted scopes and zones). */
const BUDGETS = numberFlag('budgets', 0);
const DATABASE_URL = process.env.BENCH_DATABASE_URL || undefined;

const log = (msg: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${msg}\n`);
const dist = (p: string) => join(packageRoot, 'dist', p);

async function round(targets: Target[], r: number, idle: Map<Name, number>): Promise<Round> {
  log(`round ${r}: concurrency 1, ${C1_REQUESTS} calls each, interleaved…`);
  const c1 = await interleaved(targets, C1_REQUESTS, chat);
  log(`round ${r}: stream first byte, ${STREAMS} streams each, interleaved…`);
  const fb = await interleaved(targets, STREAMS, streamTtfb);
  log(`round ${r}: concurrency 64, ${C64_SECONDS} s each in ${C64_SLICES} slices, JSON then streams…`);
  const rps = await sliced(targets, r, chat);
  const streamRps = await sliced(targets, r, streamTtfb);
  const rss = new Map(targets.map((t) => [t.name, Math.max(rps.get(t.name)!.peakRss, streamRps.get(t.name)!.peakRss)]));
  const added = (lat: Map<Name, number[]>, p: number) => {
    const direct = pct(lat.get('direct')!, p);
    return new Map(targets.map((t) => [t.name, pct(lat.get(t.name)!, p) - (t.name === 'direct' ? 0 : direct)]));
  };
  // The idle rate over the phase's time, per call: what the process would have spent with none.
  const idleCpu = new Map(targets.map((t) => [t.name, (idle.get(t.name)! * c1.seconds) / C1_REQUESTS]));
  return {
    c1p50: added(c1.lat, 50),
    c1p99: added(c1.lat, 99),
    cpu: c1.cpu,
    fb50: added(fb.lat, 50),
    fb99: added(fb.lat, 99),
    streamCpu: fb.cpu,
    idleCpu,
    rps: new Map([...rps].map(([n, x]) => [n, x.rps])),
    cpu64: new Map([...rps].map(([n, x]) => [n, x.cpu / x.calls])),
    db64: new Map([...rps].map(([n, x]) => [n, x.dbCpu / x.calls])),
    machine64: new Map([...rps].map(([n, x]) => [n, x.machineCpu / x.calls])),
    streamRps: new Map([...streamRps].map(([n, x]) => [n, x.rps])),
    streamCpu64: new Map([...streamRps].map(([n, x]) => [n, x.cpu / x.calls])),
    streamDb64: new Map([...streamRps].map(([n, x]) => [n, x.dbCpu / x.calls])),
    streamMachine64: new Map([...streamRps].map(([n, x]) => [n, x.machineCpu / x.calls])),
    rss,
  };
}

/** Concurrency 64 on each target in turn, in slices (order rotating), so that the load the
 *  rest of the machine puts on it drifts over all the targets alike: calls per second over
 *  each target's slices together, and its peak RSS. */
async function sliced(targets: Target[], r: number, fn: Call) {
  const out = new Map(
    targets.map((t) => [t.name, { calls: 0, seconds: 0, cpu: 0, dbCpu: 0, machineCpu: 0, peakRss: 0, rps: 0 }]),
  );
  for (let s = 0; s < C64_SLICES; s++) {
    for (let j = 0; j < targets.length; j++) {
      const t = targets[(r + s + j) % targets.length]!;
      const x = await loaded(t, C64_SECONDS / C64_SLICES, fn);
      const o = out.get(t.name)!;
      o.calls += x.calls;
      o.seconds += x.seconds;
      o.cpu += x.cpu;
      o.dbCpu += x.dbCpu;
      o.machineCpu += x.machineCpu;
      o.peakRss = Math.max(o.peakRss, x.peakRss);
      o.rps = o.calls / o.seconds;
    }
  }
  return out;
}

/** An OTLP/HTTP collector stand-in: reads each export and answers 200 at once. */
async function sinkCollector(): Promise<{ url: string; requests(): number }> {
  const { createServer } = await import('node:http');
  let requests = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      requests++;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  server.unref();
  const { port } = server.address() as import('node:net').AddressInfo;
  return { url: `http://127.0.0.1:${port}`, requests: () => requests };
}

async function main(): Promise<void> {
  // The proxy alone checks keys in its own store: on the embedded store that is another data
  // directory, which has none of the bench's keys.
  if (WITH_PROXY && !DATABASE_URL)
    throw new Error(
      '--proxy-alone needs BENCH_DATABASE_URL (the proxy alone and meter must share one store for the key)',
    );
  if (WITH_OTEL && !DATABASE_URL)
    throw new Error('--otel needs BENCH_DATABASE_URL (both meters must share one store for the key)');
  if (WITH_CONTROL && !DATABASE_URL)
    throw new Error('--control needs BENCH_DATABASE_URL (both meters must share one store for the key)');
  const dataDir = mkdtempSync(join(tmpdir(), 'meter-bench-'));
  const services: Service[] = [];
  const pools: Pool[] = [];
  try {
    // A key in the store before the daemon opens it; Pro's rate limit lifted out of the way
    // (the check itself still runs on every call).
    const store = await openStore({ databaseUrl: DATABASE_URL, dataDir });
    await store.query(
      `UPDATE plans SET rate_limit_per_minute = 1000000000, monthly_call_quota = NULL WHERE name = 'pro'`,
    );
    const account = `bench-${Date.now()}`;
    await createAccount(store, account, 'pro');
    const { key } = await createKey(store, account, 'bench');
    const scopes = ['account', 'provider:openai', 'model:gpt-4o-mini', 'tag:team=search', 'tag:tenant=globex'];
    const zones = ['UTC', 'Asia/Kolkata', 'America/New_York'];
    for (let i = 0; i < BUDGETS; i++)
      await createBudget(store, account, {
        amount: '1000000',
        scope: parseScope(scopes[i % scopes.length]!),
        window: (['day', 'week', 'month', 'quarter'] as const)[i % 4],
        timezone: zones[i % zones.length],
      });
    await store.close();

    const mock = await spawnService([dist('bench/mock-provider.js')], process.env, packageRoot);
    services.push(mock);
    const env = {
      ...process.env,
      METER_PORT: '0',
      METER_HOST: '127.0.0.1',
      METER_DATA_DIR: dataDir,
      DATABASE_URL: DATABASE_URL ?? '',
      METER_UPSTREAM_OPENAI: `${mock.url}/v1`,
      METER_LOG_LEVEL: 'warn',
    };
    const extra = process.env.BENCH_DAEMON_ARGS?.split(' ').filter(Boolean) ?? [];
    log('starting the floors and meter…');
    const pass = await spawnService([dist('bench/minimal-passthrough.js')], env, packageRoot);
    services.push(pass);
    // The floor that writes: into the same PostgreSQL as meter (there is none on the embedded store).
    const writes = DATABASE_URL
      ? await spawnService(
          [dist('bench/minimal-passthrough.js')],
          { ...env, FLOOR_DATABASE_URL: DATABASE_URL, FLOOR_ACCOUNT: account },
          packageRoot,
        )
      : undefined;
    if (writes) services.push(writes);
    const meter = await spawnService([...extra, dist('cli/main.js'), 'start'], env, packageRoot);
    services.push(meter);
    const proxyAlone = WITH_PROXY
      ? await spawnService(
          [dist('bench/proxy-daemon.js')],
          { ...env, METER_DATA_DIR: join(dataDir, 'proxy') },
          packageRoot,
        )
      : undefined;
    if (proxyAlone) services.push(proxyAlone);
    const collector = WITH_OTEL ? await sinkCollector() : undefined;
    const otel = collector
      ? await spawnService(
          [...extra, dist('cli/main.js'), 'start'],
          { ...env, METER_DATA_DIR: join(dataDir, 'otel'), OTEL_EXPORTER_OTLP_ENDPOINT: collector.url },
          packageRoot,
        )
      : undefined;
    if (otel) services.push(otel);
    const controlRoot = process.env.BENCH_CONTROL_ROOT || packageRoot;
    const again = WITH_CONTROL
      ? await spawnService(
          [...extra, join(controlRoot, 'dist', 'cli', 'main.js'), 'start'],
          { ...env, METER_DATA_DIR: join(dataDir, 'again') },
          packageRoot,
        )
      : undefined;
    if (again) services.push(again);

    const pool = (url: string) => {
      const p = new Pool(url, { connections: 64 });
      pools.push(p);
      return p;
    };
    const provider = { 'content-type': 'application/json', authorization: 'Bearer sk-provider' };
    const viaKey = {
      'content-type': 'application/json',
      authorization: `Bearer ${key}`,
      'x-provider-authorization': 'Bearer sk-provider',
    };
    const proxied = (name: Name, s: Service): Target => ({
      name,
      pool: pool(s.url),
      path: (p) => `/proxy/openai/${p}`,
      headers: viaKey,
      service: s,
      // CPU at c=64 counts the writes a slice left behind, and they do not spill into the next target's slice.
      settle: name === 'writes' ? flushed : name === 'pass' ? undefined : backlogDrained(s.url),
    });
    const targets: Target[] = [
      { name: 'direct', pool: pool(mock.url), path: (p) => `/v1/${p}`, headers: provider },
      proxied('pass', pass),
      ...(writes ? [proxied('writes', writes)] : []),
      ...(proxyAlone ? [proxied('proxy', proxyAlone)] : []),
      proxied('meter', meter),
      ...(otel ? [proxied('otel', otel)] : []),
      ...(again ? [proxied('again', again)] : []),
    ];

    log('warming up…');
    await interleaved(targets, 1000, chat);
    await interleaved(targets, 200, streamTtfb);
    const storeName = DATABASE_URL ? 'PostgreSQL' : 'embedded';
    const names = targets.map((t) => t.name);
    log('idle CPU of each process, 5 s without calls…');
    const idle = await idleRates(targets);
    const rounds: Round[] = [];
    for (let r = 1; r <= ROUNDS; r++) {
      rounds.push(await round(targets, r, idle));
      process.stderr.write(`${table(rounds.slice(-1), names, !DATABASE_URL)}\n`);
    }
    process.stdout.write(
      `\nmeter proxy bench, ${ROUNDS} rounds (medians), meter on ${storeName}; node ${process.version}, mock provider on loopback\n`,
    );
    process.stdout.write(`${table(rounds, names, !DATABASE_URL)}\n`);
    if (JSON_OUT)
      writeFileSync(
        JSON_OUT,
        JSON.stringify({ store: storeName, rows: summary(rounds, names, !DATABASE_URL) }, null, 1),
      );

    if (SOAK_SECONDS > 0) {
      log(`soak: concurrency 64 on meter for ${SOAK_SECONDS} s…`);
      const t0 = performance.now();
      const perMinute: number[] = [];
      const meterTarget = targets.find((t) => t.name === 'meter')!;
      const soak = await loaded(meterTarget, SOAK_SECONDS, chat, (mb) => {
        const minute = Math.floor((performance.now() - t0) / 60_000);
        perMinute[minute] = Math.max(perMinute[minute] ?? 0, mb);
      });
      process.stdout.write(
        `soak at c=64 for ${SOAK_SECONDS} s: ${soak.rps.toFixed(0)} req/s; peak RSS per minute: ${perMinute.map((mb, i) => `${i + 1} min ${mb.toFixed(0)} MB`).join(', ')}\n`,
      );
    }
    if (collector) process.stdout.write(`OTLP requests received by the collector stand-in: ${collector.requests()}\n`);
  } finally {
    await Promise.all(pools.map((p) => p.close()));
    for (const s of services.reverse()) await stopService(s);
    rmSync(dataDir, { recursive: true, force: true });
  }
  if (STARTUP_RUNS > 0) {
    log(`start-up on the embedded store, ${STARTUP_RUNS} runs…`);
    process.stdout.write(startupRows(await measureStartup(STARTUP_RUNS, log)).join('\n') + '\n');
  }
}

await main();
