import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import type { Daemon } from '../../src/server/daemon.js';
import { startShippedDaemon } from '../helpers/shipped-daemon.js';
import { backends, postgresUrl } from '../helpers/stores.js';
import { sseEvents, startFakeUpstream, writeInPieces } from '../helpers/upstreams.js';
import { fixture } from '../proxy/sdk-adapters.js';
import { PROVIDER_SLUGS } from '../../src/providers/index.js';
import { providerName, SCHEMA_URL } from '../../src/otel/attributes.js';
import { startReceiver, until, type Receiver } from './receiver.js';
import { attributeProblem, semconvAttributes, semconvMetrics } from './semconv.js';

const REGISTRY = semconvAttributes();

/** Every attribute outside meter's own namespace is the conventions' (defined, current, of its
 *  type and allowed values). error.type's enum is open: the HTTP status is its documented value. */
function conventionProblems(attributes: Record<string, unknown>): string[] {
  return Object.entries(attributes)
    .filter(([k]) => !k.startsWith('meter.'))
    .map(([k, v]) => (k === 'error.type' ? undefined : attributeProblem(REGISTRY, k, v, ['together_ai'])))
    .filter((p) => p !== undefined);
}

/**
 * OpenTelemetry on: the daemon as shipped, the official openai SDK as the client, a fake OpenAI
 * upstream, and an OTLP/HTTP receiver on loopback that decodes what meter sends.
 */
const PARENT_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT_SPAN = '00f067aa0ba902b7';

describe('OpenTelemetry export of a call', () => {
  let receiver: Receiver;
  let daemon: Daemon;
  let client: OpenAI;
  let upstreamPort: number;
  const saved = { ...process.env };

  beforeAll(async () => {
    receiver = await startReceiver();
    const fake = await startFakeUpstream();
    upstreamPort = Number(new URL(fake.origin).port);
    fake.respond(async (_req, res, seen) => {
      const body = JSON.parse(seen.body.toString());
      if (body.messages?.[0]?.content === 'fail') {
        const error = { error: { message: 'bad request', type: 'invalid_request_error' } };
        return writeInPieces(res, 400, 'application/json', [JSON.stringify(error)]);
      }
      if (body.stream === true)
        await writeInPieces(res, 200, 'text/event-stream', sseEvents(fixture('openai/chat-stream-usage.sse')));
      else await writeInPieces(res, 200, 'application/json', [fixture('openai/chat.json')]);
    });
    // The SDK's exporters read the standard variables from the environment.
    const otel = {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_BSP_SCHEDULE_DELAY: '50',
      OTEL_METRIC_EXPORT_INTERVAL: '200',
      OTEL_SERVICE_NAME: 'meter-under-test',
    };
    Object.assign(process.env, otel);
    const backend = postgresUrl ? backends.find((b) => b.name === 'postgres')! : backends[0]!;
    ({ daemon } = await startShippedDaemon(await backend.config(), {
      ...otel,
      METER_UPSTREAM_OPENAI: `${fake.origin}/v1`,
    }));
    await createAccount(daemon.store, 'otel', 'pro');
    const key = (await createKey(daemon.store, 'otel', 'e2e')).key;
    client = new OpenAI({
      apiKey: 'sk-provider',
      baseURL: `${daemon.url}/proxy/openai/v1`,
      defaultHeaders: { 'x-meter-key': key, 'x-metering-tags': 'team=search,env=test' },
    });
  }, 120_000);
  afterAll(async () => {
    process.env = saved;
    await daemon?.close();
    await receiver?.close();
  });

  it('a JSON call: one CLIENT span, child of the caller traceparent, with the GenAI and meter attributes', async () => {
    const res = await client.chat.completions.create(
      { model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] },
      { headers: { traceparent: `00-${PARENT_TRACE}-${PARENT_SPAN}-01` } },
    );
    expect(res.choices[0]!.message.content).toBeTruthy();
    await until(() => receiver.spans.some((s) => s.traceId === PARENT_TRACE));
    const span = receiver.spans.find((s) => s.traceId === PARENT_TRACE)!;
    expect(span.parentSpanId).toBe(PARENT_SPAN);
    expect(span.name).toBe('chat gpt-4o');
    expect(span.kind).toBe(3); // SPAN_KIND_CLIENT
    expect(span.schemaUrl).toBe(SCHEMA_URL);
    expect(conventionProblems(span.attributes)).toEqual([]);
    expect(span.attributes).not.toHaveProperty('gen_ai.system'); // deprecated
    expect(span.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'gpt-4o',
      'gen_ai.request.stream': false,
      'gen_ai.response.id': 'chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG',
      'openai.response.service_tier': 'default',
      'gen_ai.response.finish_reasons': ['stop'],
      'server.address': '127.0.0.1',
      'server.port': upstreamPort,
      'gen_ai.response.model': 'gpt-4o-2024-08-06',
      'gen_ai.usage.input_tokens': 2006,
      'gen_ai.usage.output_tokens': 300,
      'gen_ai.usage.cache_read.input_tokens': 1920,
      'http.response.status_code': 200,
      'meter.account': 'otel',
      'meter.usage_source': 'provider',
      'meter.tag.team': 'search',
      'meter.tag.env': 'test',
    });
    expect(span.attributes['meter.cost_usd']).toBeGreaterThan(0);
    // The span lasts as long as the call did.
    expect(BigInt(span.endTimeUnixNano)).toBeGreaterThan(BigInt(span.startTimeUnixNano));
  });

  it('a stream: its span marks the first chunk, and the GenAI metrics arrive', async () => {
    const stream = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    expect(text.length).toBeGreaterThan(0);
    await until(() => receiver.spans.some((s) => s.attributes['gen_ai.request.stream'] === true));
    const span = receiver.spans.find((s) => s.attributes['gen_ai.request.stream'] === true)!;
    expect(span.parentSpanId ?? '').toBe(''); // no traceparent: a root span
    expect(conventionProblems(span.attributes)).toEqual([]);
    expect(span.attributes).toMatchObject({
      'gen_ai.request.model': 'gpt-4o-mini',
      'gen_ai.request.stream': true,
      'gen_ai.response.id': 'chatcmpl-BVQvGZ8T7dBqN4hXcJ3oE5y1mRkLp',
      'gen_ai.response.finish_reasons': ['stop'],
      'gen_ai.usage.input_tokens': 19,
      'gen_ai.usage.output_tokens': 10,
      'gen_ai.usage.reasoning.output_tokens': 0,
    });
    expect(span.attributes['gen_ai.response.time_to_first_chunk']).toBeGreaterThan(0);
    expect(span.events.map((e) => e.name)).toContain('meter.first_chunk');
    await until(() => receiver.points.some((p) => p.metric === 'gen_ai.client.operation.time_to_first_chunk'));
    const tokens = receiver.points.filter((p) => p.metric === 'gen_ai.client.token.usage');
    expect(tokens.map((p) => p.attributes['gen_ai.token.type'])).toEqual(expect.arrayContaining(['input', 'output']));
    expect(tokens[0]!.attributes).not.toHaveProperty('meter.account'); // metrics keep bounded labels
    // The metrics are the conventions' own: names, instruments, units, attributes, schema URL.
    const defined = semconvMetrics();
    for (const p of receiver.points) {
      expect(defined.has(p.metric), p.metric).toBe(true);
      expect(p.schemaUrl).toBe(SCHEMA_URL);
      expect(conventionProblems(p.attributes), p.metric).toEqual([]);
      expect(p.attributes['server.port']).toBe(upstreamPort);
    }
    expect(defined.get('gen_ai.client.token.usage')).toEqual({ instrument: 'histogram', unit: '{token}' });
    expect(receiver.points.some((p) => p.metric === 'gen_ai.client.operation.duration')).toBe(true);
    const metrics = await (await fetch(`${daemon.url}/metrics`)).text();
    expect(metrics).toMatch(/^meter_otel_spans_exported_total [1-9]/m);
    expect(metrics).toMatch(/^meter_otel_spans_dropped_total\{reason="queue_full"\} 0$/m);
  });

  it('a provider error: a span with error.type and no usage; no token usage is recorded for it', async () => {
    await expect(
      client.chat.completions.create(
        { model: 'gpt-4o', messages: [{ role: 'user', content: 'fail' }] },
        { maxRetries: 0 },
      ),
    ).rejects.toThrow();
    await until(() => receiver.spans.some((s) => s.attributes['error.type'] === '400'));
    const span = receiver.spans.find((s) => s.attributes['error.type'] === '400')!;
    expect(span.attributes).not.toHaveProperty('gen_ai.usage.input_tokens');
    expect(span.attributes['meter.usage_source']).toBe('none');
    const failedAt = receiver.points.length;
    await until(() =>
      receiver.points
        .slice(failedAt)
        .some((p) => p.metric === 'gen_ai.client.operation.duration' && p.attributes['error.type'] === '400'),
    );
    // The points are cumulative: gpt-4o's input tokens were recorded once (the JSON call), not
    // again as 0 for the failed one.
    const input = receiver.points.filter(
      (p) =>
        p.metric === 'gen_ai.client.token.usage' &&
        p.attributes['gen_ai.request.model'] === 'gpt-4o' &&
        p.attributes['gen_ai.token.type'] === 'input',
    );
    expect(input.length).toBeGreaterThan(0);
    expect(input.every((p) => p.attributes['error.type'] === undefined)).toBe(true);
    expect(Number((input[input.length - 1]!.point as { count: string | number }).count)).toBe(1);
  });

  it('every provider has a gen_ai.provider.name the registry lists (Together: its name in the same style)', () => {
    for (const slug of PROVIDER_SLUGS)
      expect(attributeProblem(REGISTRY, 'gen_ai.provider.name', providerName(slug), ['together_ai'])).toBeUndefined();
  });
});
