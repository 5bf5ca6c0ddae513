import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import type { Daemon } from '../../src/server/daemon.js';
import { startShippedDaemon } from '../helpers/shipped-daemon.js';
import { backends, postgresUrl } from '../helpers/stores.js';
import { startFakeUpstream, writeInPieces, type FakeUpstream } from '../helpers/upstreams.js';
import { fixture } from '../proxy/sdk-adapters.js';

/**
 * A collector that refuses connections, and one that accepts and never answers: calls through
 * the daemon succeed as they do with export off, their latency stays in the same range (a loose
 * comparison, never a tight timed assertion), and the spans that cannot go out are counted.
 */
const CALLS = 40;

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port; // nothing listens there now: connections are refused
}

/** Accepts, reads, never answers. */
async function silentCollector(): Promise<{ endpoint: string; close(): void }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer(() => {});
  server.on('connection', (s) => sockets.add(s));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

describe('a dead OpenTelemetry collector', () => {
  let fake: FakeUpstream;
  let silent: Awaited<ReturnType<typeof silentCollector>>;
  const saved = { ...process.env };
  const daemons: Daemon[] = [];

  beforeAll(async () => {
    fake = await startFakeUpstream();
    fake.respond((_req, res) => writeInPieces(res, 200, 'application/json', [fixture('openai/chat.json')]));
    silent = await silentCollector();
  });
  afterAll(async () => {
    process.env = saved;
    for (const d of daemons) await d.close();
    silent?.close();
    await fake?.close();
  });

  /** A daemon with these OTEL_* settings; `calls` JSON calls through it with the openai SDK. */
  async function run(otel: Record<string, string>) {
    for (const k of Object.keys(process.env)) if (k.startsWith('OTEL_')) delete process.env[k];
    Object.assign(process.env, otel);
    const backend = postgresUrl ? backends.find((b) => b.name === 'postgres')! : backends[0]!;
    const { daemon } = await startShippedDaemon(await backend.config(), {
      ...otel,
      METER_UPSTREAM_OPENAI: `${fake.origin}/v1`,
    });
    daemons.push(daemon);
    await createAccount(daemon.store, 'dead', 'pro');
    const key = (await createKey(daemon.store, 'dead', 'e2e')).key;
    const client = new OpenAI({
      apiKey: 'sk-provider',
      baseURL: `${daemon.url}/proxy/openai/v1`,
      defaultHeaders: { 'x-meter-key': key },
      maxRetries: 0,
    });
    const latencies: number[] = [];
    for (let i = 0; i < CALLS; i++) {
      const t0 = performance.now();
      const res = await client.chat.completions.create({
        model: 'gpt-4o',
        messages: [{ role: 'user', content: 'hi' }],
      });
      latencies.push(performance.now() - t0);
      expect(res.usage?.prompt_tokens).toBe(2006); // the call's outcome is the provider's answer
    }
    const metrics = async () => (await fetch(`${daemon.url}/metrics`)).text();
    return { p50: median(latencies.slice(5)), metrics };
  }

  it(
    'changes no call and adds nothing measurable; spans that cannot go out are dropped and counted',
    { timeout: 120_000 },
    async () => {
      const off = await run({});
      const refused = await run({
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${await freePort()}`,
        OTEL_EXPORTER_OTLP_TIMEOUT: '500',
        OTEL_BSP_SCHEDULE_DELAY: '20',
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '4',
      });
      const hanging = await run({
        OTEL_EXPORTER_OTLP_ENDPOINT: silent.endpoint,
        OTEL_EXPORTER_OTLP_TIMEOUT: '60000',
        OTEL_BSP_SCHEDULE_DELAY: '20',
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '4',
        OTEL_BSP_MAX_QUEUE_SIZE: '8',
      });
      console.log(
        `p50 of a JSON call: export off ${off.p50.toFixed(2)} ms, refused ${refused.p50.toFixed(2)} ms, ` +
          `never answered ${hanging.p50.toFixed(2)} ms`,
      );
      // Loose: the same range as with export off (a blocked call would take the exporter's timeout).
      expect(refused.p50).toBeLessThan(off.p50 * 3 + 20);
      expect(hanging.p50).toBeLessThan(off.p50 * 3 + 20);
      const failed = (text: string) =>
        Number(/meter_otel_spans_dropped_total\{reason="export_failed"\} (\d+)/.exec(text)?.[1]);
      const full = (text: string) =>
        Number(/meter_otel_spans_dropped_total\{reason="queue_full"\} (\d+)/.exec(text)?.[1]);
      // Refused: batches fail and are counted (the last ones may still be in flight).
      const t0 = Date.now();
      while (failed(await refused.metrics()) === 0 && Date.now() - t0 < 10_000)
        await new Promise((r) => setTimeout(r, 100));
      expect(failed(await refused.metrics())).toBeGreaterThan(0);
      // Never answered: one batch of 4 hangs in flight, 8 wait, the rest of the 40 are dropped.
      expect(full(await hanging.metrics())).toBeGreaterThanOrEqual(CALLS - 4 - 8);
      expect(await off.metrics()).not.toContain('meter_otel_spans');
    },
  );
});
