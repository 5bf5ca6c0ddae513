/**
 * Latency the proxy adds: a mock provider (node:http on loopback) called directly and through
 * the daemon, interleaved in one run, so both see the same machine state. The daemon runs as
 * its own process on a throwaway embedded store, three ways: the smallest Node + undici
 * pass-through (bench/minimal-passthrough.ts: the floor on this machine), the proxy alone
 * (bench/proxy-daemon.ts) and the daemon as shipped (`meter start`, metering and all), so the
 * proxy's cost and the metering's can be told apart. This process is client and mock provider.
 *
 *   npm run bench -- [--c1 3000] [--c64-seconds 2] [--rounds 3] [--streams 1000] [--only minimal|bare|shipped]
 *
 * BENCH_DATABASE_URL=postgres://…/<throwaway database>: the daemon uses that PostgreSQL instead
 * of the embedded store (tells the PGlite worker's share of the cost from the rest).
 *
 * Reports, for non-streaming calls at concurrency 1 and 64, p50 / p99 latency direct and via
 * the daemon and the difference (added latency), req/s and the ratio, plus a stream's added
 * time to first byte. Targets (DESIGN.md): p50 ≤ 0.25 ms and p99 ≤ 1 ms added at concurrency 1.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { createAccount } from '../src/auth/accounts.js';
import { createKey } from '../src/auth/keys.js';
import { packageRoot } from '../src/paths.js';
import { openStore } from '../src/store/index.js';

const args = process.argv.slice(2);
const flag = (name: string, fallback: number) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const C1_REQUESTS = flag('c1', 3000);
const C64_SECONDS = flag('c64-seconds', 2);
const ROUNDS = flag('rounds', 3);
const STREAMS = flag('streams', 1000);
const ONLY = args.includes('--only') ? args[args.indexOf('--only') + 1] : undefined;

const DATABASE_URL = process.env.BENCH_DATABASE_URL || undefined;

const log = (msg: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${msg}\n`);

const CHAT_BODY = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello' }] });
const CHAT_RESPONSE = JSON.stringify({
  id: 'chatcmpl-bench', object: 'chat.completion', created: 1741570283, model: 'gpt-4o-mini-2024-07-18',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hello! How can I help you today?' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 9, completion_tokens: 9, total_tokens: 18, prompt_tokens_details: { cached_tokens: 0 } },
});
const streamEvent = (content: string) =>
  `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":${JSON.stringify(content)}}}]}\n\n`;
const STREAM_TAIL = [' How', ' can', ' I', ' help?'].map(streamEvent).join('') +
  'data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14}}\n\ndata: [DONE]\n\n';

/** The mock provider: a chat completion, or a stream whose first event leaves at once. */
async function startMockProvider(): Promise<{ server: Server; origin: string }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url!.endsWith('/stream')) {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        res.write(streamEvent('Hello!'));
        setImmediate(() => res.end(STREAM_TAIL));
      } else {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(CHAT_RESPONSE) });
        res.end(CHAT_RESPONSE);
      }
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** `meter start` in its own process, as shipped, with the mock as OpenAI's upstream. */
async function startDaemon(dataDir: string, upstream: string, variant: Variant): Promise<{ child: ChildProcess; url: string }> {
  // BENCH_DAEMON_ARGS: extra node flags for the daemon only (e.g. --cpu-prof).
  const extra = process.env.BENCH_DAEMON_ARGS?.split(' ').filter(Boolean) ?? [];
  const entry = { shipped: ['cli/main.ts', 'start'], bare: ['bench/proxy-daemon.ts'], minimal: ['bench/minimal-passthrough.ts'] }[variant];
  const child = spawn(process.execPath, [...extra, '--import', 'tsx', ...entry], {
    cwd: packageRoot,
    env: {
      ...process.env, METER_PORT: '0', METER_HOST: '127.0.0.1', METER_DATA_DIR: dataDir, DATABASE_URL: DATABASE_URL ?? '',
      METER_UPSTREAM_OPENAI: `${upstream}/v1`, METER_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /meter listening on (\S+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.once('exit', (code) => reject(new Error(`meter start exited with ${code}`)));
  });
  return { child, url };
}

interface Target {
  name: 'direct' | 'proxy';
  pool: Pool;
  path: (p: string) => string;
  headers: Record<string, string>;
}

async function chat(t: Target): Promise<number> {
  const t0 = process.hrtime.bigint();
  const res = await t.pool.request({ method: 'POST', path: t.path('chat/completions'), headers: t.headers, body: CHAT_BODY });
  await res.body.dump();
  if (res.statusCode !== 200) throw new Error(`${t.name}: status ${res.statusCode}`);
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

/** Time to the first byte of a streamed body. */
async function streamTtfb(t: Target): Promise<number> {
  const t0 = process.hrtime.bigint();
  const res = await t.pool.request({ method: 'POST', path: t.path('stream'), headers: t.headers, body: CHAT_BODY });
  let ttfb = 0;
  for await (const _ of res.body) {
    if (ttfb === 0) ttfb = Number(process.hrtime.bigint() - t0) / 1e6;
  }
  return ttfb;
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
const sortNum = (a: number[]) => [...a].sort((x, y) => x - y);
const ms = (v: number) => `${v.toFixed(3)} ms`;

/** Concurrency 1, direct and proxied one after the other, so drift hits both alike. */
async function interleaved(targets: Target[], n: number, fn: (t: Target) => Promise<number>): Promise<Record<string, number[]>> {
  const out: Record<string, number[]> = { direct: [], proxy: [] };
  for (let i = 0; i < n; i++) for (const t of targets) out[t.name]!.push(await fn(t));
  return out;
}

/** Concurrency 64 for `seconds`: latencies and completed requests. */
async function loaded(t: Target, seconds: number): Promise<{ lat: number[]; count: number; elapsed: number }> {
  const lat: number[] = [];
  const until = performance.now() + seconds * 1000;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: 64 }, async () => {
    while (performance.now() < until) lat.push(await chat(t));
  }));
  return { lat, count: lat.length, elapsed: (performance.now() - t0) / 1000 };
}

function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

type Variant = 'minimal' | 'bare' | 'shipped';

async function main(): Promise<void> {
  const mock = await startMockProvider();
  try {
    for (const variant of ['minimal', 'bare', 'shipped'] as const) if (!ONLY || ONLY === variant) await measure(variant, mock.origin);
  } finally {
    mock.server.close();
    mock.server.closeAllConnections();
  }
}

async function measure(variant: Variant, mockOrigin: string): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'meter-bench-'));
  // A key in the store before the daemon opens it (the daemon loads it at start).
  const store = await openStore({ databaseUrl: DATABASE_URL, dataDir });
  // The bench measures the proxy, not the plan's limits: lift Pro's rate limit out of the way.
  await store.query(`UPDATE plans SET rate_limit_per_minute = 1000000000, monthly_call_quota = NULL WHERE name = 'pro'`);
  // A shared PostgreSQL keeps accounts of earlier runs: each run gets its own.
  const account = DATABASE_URL ? `bench-${variant}-${Date.now()}` : 'bench';
  await createAccount(store, account, 'pro');
  const { key } = await createKey(store, account, 'bench');
  await store.close();
  log(`starting the daemon (${variant})…`);
  const daemon = await startDaemon(dataDir, mockOrigin, variant);
  const pools = [new Pool(mockOrigin, { connections: 64 }), new Pool(daemon.url, { connections: 64 })];
  const direct: Target = { name: 'direct', pool: pools[0]!, path: (p) => `/v1/${p}`, headers: { 'content-type': 'application/json', authorization: 'Bearer sk-provider' } };
  const proxy: Target = {
    name: 'proxy', pool: pools[1]!, path: (p) => `/proxy/openai/${p}`,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, 'x-provider-authorization': 'Bearer sk-provider' },
  };
  try {
    log('warming up…');
    await interleaved([direct, proxy], 1000, chat);
    await interleaved([direct, proxy], 200, streamTtfb);

    log(`concurrency 1: ${C1_REQUESTS} calls each, interleaved…`);
    const c1 = await interleaved([direct, proxy], C1_REQUESTS, chat);
    log(`stream first byte: ${STREAMS} each, interleaved…`);
    const ttfb = await interleaved([direct, proxy], STREAMS, streamTtfb);
    log(`concurrency 64: ${ROUNDS} rounds of ${C64_SECONDS} s each way…`);
    const c64 = { direct: { lat: [] as number[], count: 0, elapsed: 0 }, proxy: { lat: [] as number[], count: 0, elapsed: 0 } };
    const idleRss = rssOf(daemon.child.pid!);
    let peakRss = idleRss;
    for (let r = 0; r < ROUNDS; r++) {
      for (const t of [direct, proxy]) {
        const x = await loaded(t, C64_SECONDS);
        c64[t.name].lat.push(...x.lat);
        c64[t.name].count += x.count;
        c64[t.name].elapsed += x.elapsed;
        peakRss = Math.max(peakRss, rssOf(daemon.child.pid!));
      }
    }

    const rows: string[] = [];
    const line = (label: string, d: number[], p: number[]) => {
      const [sd, sp] = [sortNum(d), sortNum(p)];
      for (const q of [50, 99]) {
        rows.push(`${label.padEnd(24)} p${q}: direct ${ms(pct(sd, q)).padStart(10)}  via meter ${ms(pct(sp, q)).padStart(10)}  added ${ms(pct(sp, q) - pct(sd, q)).padStart(10)}  ratio ${(pct(sp, q) / pct(sd, q)).toFixed(2)}x`);
      }
    };
    line('chat, concurrency 1', c1.direct!, c1.proxy!);
    line('stream first byte, c=1', ttfb.direct!, ttfb.proxy!);
    line('chat, concurrency 64', c64.direct.lat, c64.proxy.lat);
    const rps = (x: { count: number; elapsed: number }) => x.count / x.elapsed;
    rows.push(`${'req/s, concurrency 64'.padEnd(24)}      direct ${rps(c64.direct).toFixed(0).padStart(7)}     via meter ${rps(c64.proxy).toFixed(0).padStart(7)}     ratio ${(rps(c64.proxy) / rps(c64.direct)).toFixed(2)}x`);
    rows.push(`${'daemon RSS'.padEnd(24)}      after warm-up ${idleRss.toFixed(0)} MB, peak under load ${peakRss.toFixed(0)} MB${variant === 'minimal' ? '' : DATABASE_URL ? ' (store: PostgreSQL)' : " (the embedded store's PGlite worker included)"}`);
    const what = {
      minimal: 'the smallest node:http + undici pass-through (the floor)',
      bare: 'the proxy alone (auth, header rules, no metering)',
      shipped: 'the daemon as shipped (meter start: metering, budgets, analytics…)',
    }[variant];
    process.stdout.write(`\nmeter proxy bench: ${what}; node ${process.version}, mock provider on loopback\n${rows.join('\n')}\n`);
    process.stdout.write('targets: added p50 <= 0.25 ms and p99 <= 1 ms at concurrency 1, same for a stream\'s first byte\n');
  } finally {
    await Promise.all(pools.map((p) => p.close()));
    daemon.child.kill('SIGTERM');
    await new Promise((r) => daemon.child.once('exit', r));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
