/**
 * What the daemon adds to a call, against the floor for any Node proxy: a mock provider (its own
 * process, loopback) called directly, through the smallest node:http + undici pass-through
 * (bench/minimal-passthrough.ts, the yardstick) and through `meter start` as shipped (metering,
 * spool, writer, rate limit and key checks on), interleaved call by call in one run so that all
 * see the same machine. Everything runs from dist/ (`npm run bench` builds first).
 *
 *   npm run bench -- [--c1 3000] [--streams 1000] [--c64-seconds 2] [--rounds 3]
 *                    [--soak-seconds 600] [--startup-runs 3] [--bare] [--otel]
 *
 * BENCH_DATABASE_URL=postgres://…/<throwaway database>: the daemon on PostgreSQL, else on the
 * embedded store in a throwaway data dir. BENCH_DAEMON_ARGS: node flags for the daemon only
 * (e.g. --cpu-prof). --bare adds the proxy without metering (bench/proxy-daemon.ts; PostgreSQL only).
 * --otel adds a second meter with OpenTelemetry export on (OTLP/HTTP to a collector stand-in in
 * this process that answers 200 at once): the cost of a span and metric points per call.
 *
 * Prints, per round and as medians over the rounds, the latency each adds to a direct call
 * (non-stream p50/p99 at concurrency 1, a stream's first byte), CPU per call (every thread of
 * the process, from /proc; and how much of it the process spends idle anyway, measured for 5 s
 * before the rounds), req/s at concurrency 64 and RSS under load, with the ratios of
 * DESIGN.md's targets; --soak-seconds keeps c=64 on the daemon and reports RSS every minute;
 * then `meter start` on the embedded store to /readyz 200, on a new and an existing data dir.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { createAccount } from '../src/auth/accounts.js';
import { createKey } from '../src/auth/keys.js';
import { packageRoot } from '../src/paths.js';
import { openStore } from '../src/store/index.js';
import { CHAT_BODY } from './payloads.js';
import { cpuMicros, rssMb, spawnService, stopService, type Service } from './processes.js';
import { measureStartup, startupRows } from './startup.js';
import { hasFlag, numberFlag } from './args.js';

const C1_REQUESTS = numberFlag('c1', 3000);
const STREAMS = numberFlag('streams', 1000);
const C64_SECONDS = numberFlag('c64-seconds', 2);
const ROUNDS = numberFlag('rounds', 3);
const SOAK_SECONDS = numberFlag('soak-seconds', 0);
const STARTUP_RUNS = numberFlag('startup-runs', 3);
const WITH_BARE = hasFlag('bare');
const WITH_OTEL = hasFlag('otel');
const DATABASE_URL = process.env.BENCH_DATABASE_URL || undefined;

const log = (msg: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${msg}\n`);
const dist = (p: string) => join(packageRoot, 'dist', p);

type Name = 'direct' | 'floor' | 'bare' | 'meter' | 'otel';
interface Target {
  name: Name;
  pool: Pool;
  path: (p: string) => string;
  headers: Record<string, string>;
  service?: Service;
}

async function chat(t: Target): Promise<number> {
  const t0 = process.hrtime.bigint();
  const res = await t.pool.request({
    method: 'POST',
    path: t.path('chat/completions'),
    headers: t.headers,
    body: CHAT_BODY,
  });
  await res.body.dump();
  if (res.statusCode !== 200) throw new Error(`${t.name}: status ${res.statusCode}`);
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

/** Time to the first byte of a streamed body (the rest is read too). */
async function streamTtfb(t: Target): Promise<number> {
  const t0 = process.hrtime.bigint();
  const res = await t.pool.request({ method: 'POST', path: t.path('stream'), headers: t.headers, body: CHAT_BODY });
  let ttfb = 0;
  for await (const _ of res.body) if (ttfb === 0) ttfb = Number(process.hrtime.bigint() - t0) / 1e6;
  if (res.statusCode !== 200) throw new Error(`${t.name}: status ${res.statusCode}`);
  return ttfb;
}

const sortNum = (a: number[]) => [...a].sort((x, y) => x - y);
const pct = (xs: number[], p: number) => {
  const s = sortNum(xs);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const median = (xs: number[]) => pct(xs, 50);

/** Concurrency 1, the targets one after the other (order rotating), so drift hits all alike.
 *  Returns latencies and the CPU each process used per call meanwhile. */
async function interleaved(targets: Target[], n: number, fn: (t: Target) => Promise<number>) {
  const lat = new Map<Name, number[]>(targets.map((t) => [t.name, []]));
  const cpu0 = new Map(targets.map((t) => [t.name, t.service ? cpuMicros(t.service.child.pid!) : 0]));
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < targets.length; j++) {
      const t = targets[(i + j) % targets.length]!;
      lat.get(t.name)!.push(await fn(t));
    }
  }
  const cpu = new Map(
    targets.map((t) => [t.name, t.service ? (cpuMicros(t.service.child.pid!) - cpu0.get(t.name)!) / n : 0]),
  );
  return { lat, cpu, seconds: (performance.now() - t0) / 1000 };
}

/** CPU each process spends per second with no call at all (its timers: the daemon's re-reads
 *  every flush interval, key polls): part of "CPU per call" at c=1, whatever the call costs. */
async function idleRates(targets: Target[], seconds = 5): Promise<Map<Name, number>> {
  const cpu0 = new Map(targets.map((t) => [t.name, t.service ? cpuMicros(t.service.child.pid!) : 0]));
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  return new Map(
    targets.map((t) => [t.name, t.service ? (cpuMicros(t.service.child.pid!) - cpu0.get(t.name)!) / seconds : 0]),
  );
}

/** Concurrency 64 for `seconds`: req/s and the peak RSS of the process behind the target. */
async function loaded(t: Target, seconds: number, onRss?: (mb: number) => void) {
  let count = 0;
  let peak = 0;
  const sample = () => {
    if (!t.service) return;
    const mb = rssMb(t.service.child.pid!);
    peak = Math.max(peak, mb);
    onRss?.(mb);
  };
  const sampler = setInterval(sample, 250);
  const t0 = performance.now();
  const until = t0 + seconds * 1000;
  try {
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        while (performance.now() < until) {
          await chat(t);
          count++;
        }
      }),
    );
  } finally {
    clearInterval(sampler);
  }
  sample();
  return { rps: count / ((performance.now() - t0) / 1000), peakRss: peak };
}

interface Round {
  c1p50: Map<Name, number>;
  c1p99: Map<Name, number>;
  fb50: Map<Name, number>;
  fb99: Map<Name, number>;
  cpu: Map<Name, number>;
  idleCpu: Map<Name, number>;
  rps: Map<Name, number>;
  rss: Map<Name, number>;
}

async function round(targets: Target[], r: number, idle: Map<Name, number>): Promise<Round> {
  log(`round ${r}: concurrency 1, ${C1_REQUESTS} calls each, interleaved…`);
  const c1 = await interleaved(targets, C1_REQUESTS, chat);
  log(`round ${r}: stream first byte, ${STREAMS} streams each, interleaved…`);
  const fb = await interleaved(targets, STREAMS, streamTtfb);
  log(`round ${r}: concurrency 64, ${C64_SECONDS} s each…`);
  const rps = new Map<Name, number>();
  const rss = new Map<Name, number>();
  for (let j = 0; j < targets.length; j++) {
    const t = targets[(r + j) % targets.length]!;
    const x = await loaded(t, C64_SECONDS);
    rps.set(t.name, x.rps);
    rss.set(t.name, x.peakRss);
  }
  const added = (lat: Map<Name, number[]>, p: number) => {
    const direct = pct(lat.get('direct')!, p);
    return new Map(targets.map((t) => [t.name, pct(lat.get(t.name)!, p) - (t.name === 'direct' ? 0 : direct)]));
  };
  // The idle rate over the phase's time, per call: what the process would have spent with none.
  const idleCpu = new Map(targets.map((t) => [t.name, (idle.get(t.name)! * c1.seconds) / C1_REQUESTS]));
  return {
    c1p50: added(c1.lat, 50),
    c1p99: added(c1.lat, 99),
    fb50: added(fb.lat, 50),
    fb99: added(fb.lat, 99),
    cpu: c1.cpu,
    idleCpu,
    rps,
    rss,
  };
}

/** The table of DESIGN.md's targets: medians over the rounds, ratio = meter / floor per round, then the median. */
function table(rounds: Round[], names: Name[], store: string): string {
  const med = (pick: (r: Round) => Map<Name, number>, n: Name) => median(rounds.map((r) => pick(r).get(n)!));
  const ratio = (pick: (r: Round) => Map<Name, number>) =>
    median(rounds.map((r) => pick(r).get('meter')! / pick(r).get('floor')!));
  const proxies = names.filter((n) => n !== 'direct');
  const head = {
    floor: 'bare pass-through',
    bare: 'proxy alone',
    meter: 'meter',
    otel: 'meter + OTel export',
    direct: 'direct',
  };
  const rows: string[] = [
    `| ${['', ...proxies.map((n) => head[n]), 'ratio', 'target'].join(' | ')} |`,
    `|${Array(proxies.length + 3)
      .fill('---')
      .join('|')}|`,
  ];
  const ms = (v: number) => `${v < 0 ? '' : '+'}${v.toFixed(3)} ms`;
  const line = (
    label: string,
    pick: (r: Round) => Map<Name, number>,
    fmt: (v: number) => string,
    target: string | undefined,
  ) =>
    rows.push(
      `| ${[label, ...proxies.map((n) => fmt(med(pick, n))), target === undefined ? '' : `${ratio(pick).toFixed(2)}×`, target ?? ''].join(' | ')} |`,
    );
  line('added non-stream p50, c=1', (r) => r.c1p50, ms, '≤ 1.3×');
  line('added non-stream p99, c=1', (r) => r.c1p99, ms, '≤ 1.5×');
  line('added stream first byte p50, c=1', (r) => r.fb50, ms, '≤ 1.3×');
  line('added stream first byte p99, c=1', (r) => r.fb99, ms, '');
  line(
    'CPU per call, c=1',
    (r) => r.cpu,
    (v) => `${v.toFixed(0)} µs`,
    '≤ 1.3×',
  );
  line(
    '… of it idle work (idle CPU/s × phase time ÷ calls)',
    (r) => r.idleCpu,
    (v) => `${v.toFixed(0)} µs`,
    undefined,
  );
  line(
    'req/s, c=64',
    (r) => r.rps,
    (v) => v.toFixed(0),
    '≥ 0.95×',
  );
  line(
    'peak RSS under load',
    (r) => r.rss,
    (v) => `${v.toFixed(0)} MB`,
    store === 'PostgreSQL' ? 'meter ≤ 150 MB' : 'meter ≤ 250 MB',
  );
  const direct = (pick: (r: Round) => Map<Name, number>) => med(pick, 'direct').toFixed(3);
  rows.push(
    '',
    `direct call (the baseline): p50 ${direct((r) => r.c1p50)} ms, p99 ${direct((r) => r.c1p99)} ms; first byte p50 ${direct((r) => r.fb50)} ms; ${med((r) => r.rps, 'direct').toFixed(0)} req/s at c=64`,
  );
  return rows.join('\n');
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
  if (WITH_BARE && !DATABASE_URL)
    throw new Error('--bare needs BENCH_DATABASE_URL (the proxy alone and meter must share one store for the key)');
  if (WITH_OTEL && !DATABASE_URL)
    throw new Error('--otel needs BENCH_DATABASE_URL (both meters must share one store for the key)');
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
    log('starting the bare pass-through and meter…');
    const floor = await spawnService([dist('bench/minimal-passthrough.js')], env, packageRoot);
    services.push(floor);
    const meter = await spawnService([...extra, dist('cli/main.js'), 'start'], env, packageRoot);
    services.push(meter);
    const bare = WITH_BARE
      ? await spawnService(
          [dist('bench/proxy-daemon.js')],
          { ...env, METER_DATA_DIR: join(dataDir, 'bare') },
          packageRoot,
        )
      : undefined;
    if (bare) services.push(bare);
    const collector = WITH_OTEL ? await sinkCollector() : undefined;
    const otel = collector
      ? await spawnService(
          [...extra, dist('cli/main.js'), 'start'],
          { ...env, METER_DATA_DIR: join(dataDir, 'otel'), OTEL_EXPORTER_OTLP_ENDPOINT: collector.url },
          packageRoot,
        )
      : undefined;
    if (otel) services.push(otel);

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
    });
    const targets: Target[] = [
      { name: 'direct', pool: pool(mock.url), path: (p) => `/v1/${p}`, headers: provider },
      proxied('floor', floor),
      ...(bare ? [proxied('bare', bare)] : []),
      proxied('meter', meter),
      ...(otel ? [proxied('otel', otel)] : []),
    ];

    log('warming up…');
    await interleaved(targets, 1000, chat);
    await interleaved(targets, 200, streamTtfb);
    const storeName = DATABASE_URL ? 'PostgreSQL' : 'embedded';
    log('idle CPU of each process, 5 s without calls…');
    const idle = await idleRates(targets);
    const rounds: Round[] = [];
    for (let r = 1; r <= ROUNDS; r++) {
      rounds.push(await round(targets, r, idle));
      process.stderr.write(
        `${table(
          rounds.slice(-1),
          targets.map((t) => t.name),
          storeName,
        )}\n`,
      );
    }
    process.stdout.write(
      `\nmeter proxy bench, ${ROUNDS} rounds (medians), meter on ${storeName}; node ${process.version}, mock provider on loopback\n`,
    );
    process.stdout.write(
      `${table(
        rounds,
        targets.map((t) => t.name),
        storeName,
      )}\n`,
    );

    if (SOAK_SECONDS > 0) {
      log(`soak: concurrency 64 on meter for ${SOAK_SECONDS} s…`);
      const t0 = performance.now();
      const perMinute: number[] = [];
      const meterTarget = targets.find((t) => t.name === 'meter')!;
      const soak = await loaded(meterTarget, SOAK_SECONDS, (mb) => {
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
