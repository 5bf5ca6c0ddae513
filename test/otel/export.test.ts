import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import type { Daemon } from '../../src/server/daemon.js';
import { startShippedDaemon } from '../helpers/shipped-daemon.js';
import { backends, postgresUrl } from '../helpers/stores.js';
import { sseEvents, startFakeUpstream, writeInPieces } from '../helpers/upstreams.js';
import { fixture } from '../proxy/sdk-adapters.js';
import { startReceiver, until, type Receiver } from './receiver.js';

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
  const saved = { ...process.env };

  beforeAll(async () => {
    receiver = await startReceiver();
    const fake = await startFakeUpstream();
    fake.respond(async (_req, res, seen) => {
      const stream = JSON.parse(seen.body.toString()).stream === true;
      if (stream)
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
    expect(span.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.system': 'openai',
      'gen_ai.request.model': 'gpt-4o',
      'gen_ai.response.model': 'gpt-4o-2024-08-06',
      'gen_ai.usage.input_tokens': 2006,
      'gen_ai.usage.output_tokens': 300,
      'gen_ai.usage.cache_read.input_tokens': 1920,
      'http.response.status_code': 200,
      'meter.account': 'otel',
      'meter.usage_source': 'provider',
      'meter.tag.team': 'search',
      'meter.tag.env': 'test',
      'meter.stream': false,
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
    await until(() => receiver.spans.some((s) => s.attributes['meter.stream'] === true));
    const span = receiver.spans.find((s) => s.attributes['meter.stream'] === true)!;
    expect(span.parentSpanId ?? '').toBe(''); // no traceparent: a root span
    expect(span.attributes).toMatchObject({
      'gen_ai.request.model': 'gpt-4o-mini',
      'gen_ai.usage.input_tokens': 19,
      'gen_ai.usage.output_tokens': 10,
    });
    expect(span.events.map((e) => e.name)).toContain('gen_ai.first_chunk');
    await until(() => receiver.points.some((p) => p.metric === 'gen_ai.client.operation.time_to_first_chunk'));
    const tokens = receiver.points.filter((p) => p.metric === 'gen_ai.client.token.usage');
    expect(tokens.map((p) => p.attributes['gen_ai.token.type'])).toEqual(expect.arrayContaining(['input', 'output']));
    expect(tokens[0]!.attributes).not.toHaveProperty('meter.account'); // metrics keep bounded labels
    expect(receiver.points.some((p) => p.metric === 'gen_ai.client.operation.duration')).toBe(true);
    const metrics = await (await fetch(`${daemon.url}/metrics`)).text();
    expect(metrics).toMatch(/^meter_otel_spans_exported_total [1-9]/m);
    expect(metrics).toMatch(/^meter_otel_spans_dropped_total\{reason="queue_full"\} 0$/m);
  });
});
