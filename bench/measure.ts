/** The proxy bench's load: calls and streams at concurrency 1 (interleaved) and 64, timed. */
import type { Pool } from 'undici';
import { CHAT_BODY } from './payloads.js';
import { cpuMicros, machineCpuMicros, postgresCpuMicros, rssMb, type Service } from './processes.js';

/** direct; the bare pass-through; the floor that writes; the proxy alone; meter; meter with OTel;
 *  meter again (the control: a second, identical daemon). */
export type Name = 'direct' | 'pass' | 'writes' | 'proxy' | 'meter' | 'otel' | 'again';
export interface Target {
  name: Name;
  pool: Pool;
  path: (p: string) => string;
  headers: Record<string, string>;
  service?: Service;
  /** Waits until the writes the load left behind are done (their CPU is the calls'). */
  settle?: () => Promise<void>;
}

export type Call = (t: Target) => Promise<number>;

/** A whole JSON call: its latency (ms). */
export async function chat(t: Target): Promise<number> {
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
export async function streamTtfb(t: Target): Promise<number> {
  const t0 = process.hrtime.bigint();
  const res = await t.pool.request({ method: 'POST', path: t.path('stream'), headers: t.headers, body: CHAT_BODY });
  let ttfb = 0;
  for await (const _ of res.body) if (ttfb === 0) ttfb = Number(process.hrtime.bigint() - t0) / 1e6;
  if (res.statusCode !== 200) throw new Error(`${t.name}: status ${res.statusCode}`);
  return ttfb;
}

const cpuOf = (t: Target) => (t.service ? cpuMicros(t.service.child.pid!) : 0);

/** Concurrency 1, the targets one after the other (order rotating), so drift hits all alike.
 *  Returns latencies and the CPU each process used per call meanwhile. */
export async function interleaved(targets: Target[], n: number, fn: Call) {
  const lat = new Map<Name, number[]>(targets.map((t) => [t.name, []]));
  const cpu0 = new Map(targets.map((t) => [t.name, cpuOf(t)]));
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < targets.length; j++) {
      const t = targets[(i + j) % targets.length]!;
      lat.get(t.name)!.push(await fn(t));
    }
  }
  const cpu = new Map(targets.map((t) => [t.name, (cpuOf(t) - cpu0.get(t.name)!) / n]));
  return { lat, cpu, seconds: (performance.now() - t0) / 1000 };
}

/** CPU each process spends per second with no call at all (its timers: the daemon's re-reads
 *  every flush interval, key polls): part of "CPU per call" at c=1, whatever the call costs. */
export async function idleRates(targets: Target[], seconds = 5): Promise<Map<Name, number>> {
  const cpu0 = new Map(targets.map((t) => [t.name, cpuOf(t)]));
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  return new Map(targets.map((t) => [t.name, (cpuOf(t) - cpu0.get(t.name)!) / seconds]));
}

/** Concurrency 64 for `seconds`: req/s, the CPU of the process behind the target, of PostgreSQL
 *  and of the machine, and the process's peak RSS. */
export async function loaded(t: Target, seconds: number, fn: Call = chat, onRss?: (mb: number) => void) {
  let count = 0;
  let peak = 0;
  const sample = () => {
    if (!t.service) return;
    const mb = rssMb(t.service.child.pid!);
    peak = Math.max(peak, mb);
    onRss?.(mb);
  };
  const sampler = setInterval(sample, 250);
  const cpu0 = cpuOf(t);
  const db0 = postgresCpuMicros();
  const machine0 = machineCpuMicros();
  const t0 = performance.now();
  const until = t0 + seconds * 1000;
  try {
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        while (performance.now() < until) {
          await fn(t);
          count++;
        }
      }),
    );
  } finally {
    clearInterval(sampler);
  }
  sample();
  const took = (performance.now() - t0) / 1000;
  await t.settle?.();
  return {
    rps: count / took,
    calls: count,
    seconds: took,
    cpu: cpuOf(t) - cpu0,
    // What the slice cost PostgreSQL and the whole machine (load generator and mock provider
    // included): on two shared cores a proxy's rate follows the machine's CPU per call.
    dbCpu: postgresCpuMicros() - db0,
    machineCpu: machineCpuMicros() - machine0,
    peakRss: peak,
  };
}

const sortNum = (a: number[]) => [...a].sort((x, y) => x - y);
export const pct = (xs: number[], p: number) => {
  const s = sortNum(xs);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
export const median = (xs: number[]) => pct(xs, 50);

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A meter's settle: /metrics (loopback) until its spool backlog is empty, at most 30 s. It
 *  waits one flush interval (as the floor's settle does) before it asks, then asks every 100 ms:
 *  a scrape is CPU of the process measured, and one every 20 ms charged meter for the bench's
 *  own questions (9% of its CPU per stream at c=64 in a profile on a busy machine). */
export function backlogDrained(url: string): () => Promise<void> {
  return async () => {
    const until = performance.now() + 30_000;
    await sleep(250);
    while (performance.now() < until) {
      const res = await fetch(`${url}/metrics`);
      const m = /^meter_spool_backlog_events (\d+)/m.exec(await res.text());
      if (!m || m[1] === '0') return;
      await sleep(100);
    }
  };
}

/** The floor that writes flushes every 200 ms: its last batch is written within 250 ms. */
export const flushed = () => sleep(250);
