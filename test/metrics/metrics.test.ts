import OpenAI from 'openai';
import pino from 'pino';
import { beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import { parseServiceKey } from '../../src/auth/key-format.js';
import { loadConfig } from '../../src/config.js';
import { isLoopback } from '../../src/metrics/endpoint.js';
import { components } from '../../src/server/components.js';
import { startDaemon, type Daemon } from '../../src/server/daemon.js';
import { atFileEnd, tempDirAtFileEnd } from '../helpers/cleanup.js';
import { databaseForFile } from '../helpers/file-stores.js';
import { promtool, scrape, type Scrape } from '../helpers/prom-text.js';
import { sseEvents, startFakeUpstream, writeInPieces, type FakeUpstream } from '../helpers/upstreams.js';
import { fixture, PROVIDER_KEY } from '../proxy/sdk-adapters.js';
import { hasTool, PROMTOOL_INSTALL } from '../helpers/tools.js';

const hasPromtool = hasTool('promtool', PROMTOOL_INSTALL);

/**
 * /metrics scraped for real from the daemon as shipped (src/server/components.ts), while the
 * official OpenAI SDK makes calls through it: the text parses, passes promtool's lint, the
 * values move with the calls and agree with the store, and no secret or tag value shows.
 */
const TAG_VALUE = 'tag-value-never-in-metrics';
const CHAT = fixture('openai/chat.json');
const STREAM = fixture('openai/chat-stream-usage.sse');

async function fakeOpenAI(): Promise<FakeUpstream> {
  const fake = await startFakeUpstream();
  fake.respond(async (_req, res, seen) => {
    const body = JSON.parse(seen.body.toString()) as { model: string; stream?: boolean };
    if (body.model === 'fails')
      return writeInPieces(res, 500, 'application/json', ['{"error":{"message":"boom","type":"server_error"}}']);
    if (body.stream) return writeInPieces(res, 200, 'text/event-stream', sseEvents(STREAM));
    return writeInPieces(res, 200, 'application/json', [CHAT]);
  });
  return fake;
}

async function daemonWith(
  env: Record<string, string>,
): Promise<{ daemon: Daemon; key: string; keyId: string; account: string }> {
  const fake = await fakeOpenAI();
  const config = loadConfig({
    METER_PORT: '0',
    METER_HOST: '127.0.0.1',
    METER_DATA_DIR: tempDirAtFileEnd(),
    METER_FLUSH_INTERVAL_MS: '20',
    DATABASE_URL: await databaseForFile(),
    METER_UPSTREAM_OPENAI: `${fake.origin}/v1`,
    ...env,
  });
  const daemon = await startDaemon(config, pino({ level: 'silent' }), components);
  atFileEnd(() => daemon.close());
  const account = `metrics-acct-${process.pid}`;
  await createAccount(daemon.store, account, 'pro');
  const created = await createKey(daemon.store, account, 'metrics');
  return { daemon, key: created.key, keyId: created.id, account };
}

const client = (daemon: Daemon, key: string) =>
  new OpenAI({
    apiKey: PROVIDER_KEY,
    baseURL: `${daemon.url}/proxy/openai`,
    maxRetries: 0,
    defaultHeaders: {
      'X-Meter-Key': key,
      'X-Metering-Tags': `team=${TAG_VALUE}`,
      'X-Tenant-ID': `${TAG_VALUE}-tenant`,
    },
  });

/** Scrapes until `ready` holds (events reach the store within a few flush intervals). */
async function scrapeUntil(url: string, ready: (s: Scrape) => boolean): Promise<Scrape> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const s = await scrape(url);
    if (ready(s) || Date.now() > deadline) return s;
    await new Promise((r) => setTimeout(r, 20));
  }
}

const overheadMs = /^\d+\.\d{3}$/;

describe('GET /metrics on the daemon port (no allow-list)', () => {
  let d: Awaited<ReturnType<typeof daemonWith>>;
  let before: Scrape;
  let after: Scrape;
  const headers: string[] = [];

  beforeAll(async () => {
    d = await daemonWith({});
    before = await scrape(d.daemon.metricsUrl);
    const openai = client(d.daemon, d.key);
    const chat = await openai.chat.completions
      .create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'Hi' }] })
      .withResponse();
    headers.push(chat.response.headers.get('x-meter-overhead-ms')!);
    const stream = await openai.chat.completions
      .create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'Hi' }],
        stream: true,
        stream_options: { include_usage: true },
      })
      .withResponse();
    headers.push(stream.response.headers.get('x-meter-overhead-ms')!);
    for await (const _ of stream.data) {
      /* read to the end */
    }
    const failed = await openai.chat.completions
      .create({ model: 'fails', messages: [{ role: 'user', content: 'Hi' }] })
      .catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(OpenAI.InternalServerError);
    headers.push((failed as InstanceType<typeof OpenAI.InternalServerError>).headers.get('x-meter-overhead-ms')!);
    // refused by the daemon itself: nothing forwarded
    const refused = await fetch(`${d.daemon.url}/proxy/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: 'Bearer mk_nope_nope' },
    });
    expect(refused.status).toBe(401);
    after = await scrapeUntil(d.daemon.metricsUrl, (s) => s.value('meter_events_written_total') >= 3);
  });

  it.skipIf(!hasPromtool)('is Prometheus text that promtool accepts without a lint finding', () => {
    const check = promtool(['check', 'metrics'], after.text);
    // the only findings are on prom-client's own process metrics (nodejs_active_handles_total
    // is a gauge); every meter_ name follows the conventions
    const findings = check.output.split('\n').filter((l) => l !== '');
    expect(findings.filter((l) => !/^nodejs_active_\w+_total non-counter metrics/.test(l))).toEqual([]);
    for (const name of [
      'meter_calls_total',
      'meter_tokens_total',
      'meter_cost_usd_total',
      'meter_events_total',
      'meter_unpriced_calls_total',
      'meter_overhead_seconds',
      'meter_first_byte_overhead_seconds',
      'meter_upstream_latency_seconds',
      'meter_spool_backlog_events',
      'meter_spool_backlog_bytes',
      'meter_writer_lag_seconds',
      'meter_write_batches_total',
      'meter_write_failures_total',
      'meter_store_up',
      'meter_alert_deliveries_total',
      'meter_key_cache_age_seconds',
      'meter_refusals_total',
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_eventloop_lag_seconds',
    ]) {
      expect(after.types.has(name), name).toBe(true);
    }
    expect(after.types.get('meter_overhead_seconds')).toBe('histogram');
    expect(after.types.get('meter_calls_total')).toBe('counter');
    expect(after.types.get('meter_writer_lag_seconds')).toBe('gauge');
  });

  it('counts calls, tokens, cost and usage sources as the store recorded them', async () => {
    expect(before.value('meter_calls_total')).toBe(0);
    expect(after.value('meter_calls_total', { provider: 'openai', status_class: '2xx' })).toBe(2);
    expect(after.value('meter_calls_total', { provider: 'openai', status_class: '5xx' })).toBe(1);
    expect(after.value('meter_events_total', { usage_source: 'provider' })).toBe(2);
    expect(after.value('meter_events_total', { usage_source: 'none' })).toBe(1);
    const [sums] = await d.daemon.store.query<Record<string, string>>(
      `SELECT sum(input_tokens)::text AS input, sum(output_tokens)::text AS output, sum(cached_input_tokens)::text AS cached_input,
              sum(reasoning_tokens)::text AS reasoning, sum(cost)::text AS cost, count(*)::text AS n FROM usage_events`,
    );
    expect(sums!.n).toBe('3');
    for (const kind of ['input', 'output', 'cached_input', 'reasoning']) {
      expect(after.value('meter_tokens_total', { provider: 'openai', kind }), kind).toBe(Number(sums![kind]));
    }
    expect(Number(sums!.input)).toBeGreaterThan(0);
    expect(after.value('meter_cost_usd_total', { provider: 'openai' })).toBeCloseTo(Number(sums!.cost), 8);
    expect(Number(sums!.cost)).toBeGreaterThan(0);
    expect(after.value('meter_events_written_total')).toBe(3);
    expect(after.value('meter_write_batches_total')).toBeGreaterThanOrEqual(1);
    expect(after.value('meter_spool_backlog_events')).toBe(0);
    expect(after.value('meter_writer_lag_seconds')).toBe(0);
    expect(after.value('meter_store_up', { store: 'postgres' })).toBe(1);
    expect(after.value('meter_refusals_total', { reason: 'invalid_api_key' })).toBe(1);
    const age = after.value('meter_key_cache_age_seconds');
    expect(age).toBeGreaterThanOrEqual(0);
    expect(age).toBeLessThan(60);
  });

  it('times every call: the overhead header, the overhead and upstream histograms', () => {
    expect(headers).toHaveLength(3);
    for (const h of headers) expect(h).toMatch(overheadMs);
    for (const name of [
      'meter_overhead_seconds',
      'meter_first_byte_overhead_seconds',
      'meter_upstream_latency_seconds',
    ]) {
      expect(before.value(`${name}_count`, { provider: 'openai' }), name).toBe(0);
      expect(after.value(`${name}_count`, { provider: 'openai' }), name).toBe(3);
      expect(after.value(`${name}_bucket`, { provider: 'openai', le: '+Inf' }), name).toBe(3);
      expect(after.value(`${name}_sum`, { provider: 'openai' }), name).toBeGreaterThan(0);
    }
    expect(after.value('meter_overhead_seconds_count', { provider: 'anthropic' })).toBe(0);
    // buckets are cumulative; the header's milliseconds and the histogram's seconds agree
    const buckets = after.samples
      .filter((x) => x.name === 'meter_overhead_seconds_bucket' && x.labels.provider === 'openai')
      .map((x) => x.value);
    expect(buckets).toEqual([...buckets].sort((a, b) => a - b));
    const headerSum = headers.reduce((n, h) => n + Number(h), 0) / 1000;
    expect(after.value('meter_overhead_seconds_sum', { provider: 'openai' })).toBeCloseTo(headerSum, 5);
  });

  it('shows no key, account, tag value or model (labels are bounded)', () => {
    for (const secret of [
      d.key,
      parseServiceKey(d.key)!.secret,
      d.keyId,
      d.account,
      PROVIDER_KEY,
      TAG_VALUE,
      'gpt-4o',
      'gpt-4o-mini',
    ]) {
      expect(after.text, secret).not.toContain(secret);
    }
    const labelNames = new Set<string>();
    for (const x of after.samples)
      if (x.name.startsWith('meter_')) for (const k of Object.keys(x.labels)) labelNames.add(k);
    expect([...labelNames].sort()).toEqual([
      'kind',
      'le',
      'provider',
      'reason',
      'result',
      'status_class',
      'store',
      'usage_source',
    ]);
  });
});

describe('METER_METRICS_PORT and METER_METRICS_MODELS', () => {
  let d: Awaited<ReturnType<typeof daemonWith>>;

  beforeAll(async () => {
    d = await daemonWith({
      METER_METRICS_PORT: '0',
      METER_METRICS_MODELS: 'gpt-4o-2024-08-06, some-other-model',
      METER_KEY_REFRESH_MS: '100',
    });
  });

  it('serves /metrics on its own port only, and nothing else there', async () => {
    expect(new URL(d.daemon.metricsUrl).port).not.toBe(new URL(d.daemon.url).port);
    const onProxyPort = await fetch(`${d.daemon.url}/metrics`);
    expect(onProxyPort.status).toBe(404);
    expect(await onProxyPort.text()).toContain('METER_METRICS_PORT');
    const proxyOnMetricsPort = await fetch(new URL('/proxy/openai/v1/models', d.daemon.metricsUrl), {
      headers: { 'x-meter-key': d.key },
    });
    expect(proxyOnMetricsPort.status).toBe(404);
    const res = await fetch(d.daemon.metricsUrl);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
  });

  it('labels allow-listed models by name and every other model as "other"', async () => {
    const openai = client(d.daemon, d.key);
    await openai.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'Hi' }] });
    await openai.chat.completions
      .create({ model: 'fails', messages: [{ role: 'user', content: 'Hi' }] })
      .catch(() => {});
    const s = await scrapeUntil(d.daemon.metricsUrl, (x) => x.value('meter_calls_total') >= 2);
    expect(s.value('meter_calls_total', { provider: 'openai', model: 'gpt-4o-2024-08-06', status_class: '2xx' })).toBe(
      1,
    );
    expect(s.value('meter_calls_total', { provider: 'openai', model: 'other', status_class: '5xx' })).toBe(1);
    expect(s.value('meter_cost_usd_total', { model: 'gpt-4o-2024-08-06' })).toBeGreaterThan(0);
    expect(s.text).not.toContain('fails');
  });

  it('counts the calls a plan limit refuses, by reason', async () => {
    await d.daemon.store.query(`UPDATE plans SET rate_limit_per_minute = 1 WHERE name = 'pro'`);
    const openai = client(d.daemon, d.key);
    const deadline = Date.now() + 10_000;
    let refused: unknown;
    while (!refused && Date.now() < deadline) {
      refused = await openai.chat.completions
        .create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'Hi' }] })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
    }
    expect((refused as { code?: string }).code).toBe('rate_limited');
    const s = await scrape(d.daemon.metricsUrl);
    expect(s.value('meter_refusals_total', { reason: 'rate_limited' })).toBeGreaterThanOrEqual(1);
    expect(s.value('meter_refusals_total', { reason: 'quota_exceeded' })).toBe(0);
  });
});

describe('who may scrape /metrics on the daemon port', () => {
  it('loopback peers only: 127.0.0.0/8 and ::1, also IPv4-mapped', () => {
    for (const a of ['127.0.0.1', '127.8.9.10', '::1', '::ffff:127.0.0.1']) expect(isLoopback(a), a).toBe(true);
    for (const a of [
      '10.0.0.1',
      '172.17.0.1',
      '192.168.1.2',
      '::ffff:10.0.0.1',
      'fe80::1',
      '::',
      '0.0.0.0',
      '',
      undefined,
    ]) {
      expect(isLoopback(a), String(a)).toBe(false);
    }
  });
});
