import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { ZERO_COST } from '../../src/pricing/index.js';
import type { Usage } from '../../src/providers/types.js';
import { contentTypes, loadFixtures, meter, pricer, randomChunks, statusOf, type Fixture } from './fixtures.js';

const fixtures = loadFixtures();
const TOKEN_FIELDS = [
  'inputTokens',
  'outputTokens',
  'cachedInputTokens',
  'cacheWriteTokens',
  'reasoningTokens',
] as const;

function runFixture(f: Fixture, chunks: Buffer[], extra: { completed?: boolean } = {}) {
  return meter({
    slug: f.slug,
    path: f.expected.request.path,
    requestBody: f.expected.request.body,
    status: statusOf(f),
    headers: { 'content-type': contentTypes[f.kind] },
    chunks,
    ...extra,
  });
}

function expectedUsage(f: Fixture): Usage {
  const u = f.expected.usage!;
  const usage = { ...u } as unknown as Usage;
  if (typeof u.providerCostTicks === 'string') usage.providerCostTicks = BigInt(u.providerCostTicks);
  return usage;
}

describe("CallMeter over the providers' fixtures, in arbitrary chunkings", () => {
  expect(fixtures.length).toBeGreaterThan(20);
  for (const f of fixtures) {
    const exact = f.expected.usage !== null && !f.expected.incomplete;
    it(`${f.slug}/${f.file}: one event, ${exact ? 'provider usage and exact cost' : f.kind === 'json' ? 'no usage' : 'estimated'}`, async () => {
      for (const seed of [1, 7, 42]) {
        const { event, events } = await runFixture(f, randomChunks(f.bytes, seed, seed === 1 ? 3 : 97));
        expect(events).toHaveLength(1);
        expect(event.status).toBe(statusOf(f));
        expect(event.stream).toBe(f.kind !== 'json');
        const requested = f.slug === 'gemini' ? null : ((f.expected.request.body as { model?: string }).model ?? null);
        if (requested) expect(event.requestedModel).toBe(requested);
        if (f.expected.model) expect(event.model).toBe(f.expected.model);
        if (exact) {
          const want = expectedUsage(f);
          for (const k of TOKEN_FIELDS) expect(event[k], k).toBe(want[k]);
          expect(event.usageSource).toBe('provider');
          expect(event.providerCostTicks).toBe(want.providerCostTicks?.toString() ?? null);
          // every billed unit beyond the token columns, under genai-prices' names (rerank and X searches too)
          const units = {
            ...(want.cacheWrite1hTokens ? { cache_write_1h_tokens: want.cacheWrite1hTokens } : {}),
            ...want.units,
          };
          expect(event.units).toEqual(Object.keys(units).length ? units : null);
          const priced = pricer.cost({
            provider: f.slug,
            model: f.expected.model ?? null,
            requestedModel: event.requestedModel,
            usage: want,
            time: new Date(event.time),
          });
          expect(event.cost).toBe(priced.cost);
          expect(event.unpriced).toBe(priced.unpriced);
          expect(event.priceVersion).toBe(pricer.priceVersion);
        } else if (f.kind === 'json') {
          // a provider error without usage: counted, costs nothing
          expect(event.usageSource).toBe('none');
          expect(event.cost).toBe(ZERO_COST);
          expect(event.inputTokens + event.outputTokens).toBe(0);
        } else {
          // a stream without (complete) usage is estimated, never a silent zero
          expect(event.usageSource).toBe('estimated');
          expect(event.inputTokens).toBeGreaterThan(0);
          expect(event.outputTokens).toBeGreaterThan(0);
          if (f.expected.usage) expect(event.inputTokens).toBeGreaterThanOrEqual(Number(f.expected.usage.inputTokens));
        }
      }
    });
  }
});

const byName = (slug: string, file: string) => fixtures.find((f) => f.slug === slug && f.file === file)!;

describe('CallMeter', () => {
  it('a rerank call stores its search units; no table prices rerank-v3.5, so it is flagged unpriced, never a silent 0', async () => {
    const f = byName('cohere', 'rerank-v2.json');
    const { event } = await runFixture(f, [f.bytes]);
    expect(event.usageSource).toBe('provider');
    expect(event.model).toBe('rerank-v3.5');
    expect(event.units).toEqual({ rerank_searches: 1 });
    expect(event.unpriced).toBe(true);
    expect(event.cost).toBe(ZERO_COST);
  });

  it('a stream without usage is estimated from the request and the streamed text, and priced', async () => {
    const f = byName('openai', 'chat-stream-no-usage.sse');
    const { event } = await runFixture(f, [f.bytes]);
    expect(event.usageSource).toBe('estimated');
    expect(event.model).toBe('gpt-4o-mini-2024-07-18');
    // "Paris is the capital of France." is 7 tokens in o200k; the prompt ~ 13 plus chat framing
    expect(event.outputTokens).toBe(7);
    expect(event.inputTokens).toBeGreaterThan(10);
    expect(event.unpriced).toBe(false);
    expect(Number(event.cost)).toBeGreaterThan(0);
  });

  it('a client that leaves mid-stream is metered for what was streamed', async () => {
    const f = byName('openai', 'chat-stream-usage.sse');
    const full = await runFixture(f, [f.bytes]);
    const cut = f.bytes.indexOf('"finish_reason":"stop"');
    expect(cut).toBeGreaterThan(0);
    const { event } = await runFixture(f, randomChunks(f.bytes.subarray(0, cut), 3), { completed: false });
    expect(event.status).toBe(200);
    expect(event.usageSource).toBe('estimated');
    expect(event.outputTokens).toBeGreaterThan(0);
    expect(event.outputTokens).toBeLessThanOrEqual(full.event.outputTokens + 2);
    expect(Number(event.cost)).toBeGreaterThan(0);
  });

  it('an Anthropic stream cut after message_start keeps the exact input and estimates the output', async () => {
    const f = byName('anthropic', 'stream.sse');
    const cut = f.bytes.indexOf('event: content_block_stop');
    const { event } = await runFixture(f, [f.bytes.subarray(0, cut)], { completed: false });
    expect(event.usageSource).toBe('estimated');
    const start = JSON.parse(/event: message_start\r?\ndata: (.*)/.exec(f.bytes.toString())![1]!) as {
      message: { usage: { input_tokens: number } };
    };
    expect(event.inputTokens).toBeGreaterThanOrEqual(start.message.usage.input_tokens);
    expect(event.outputTokens).toBeGreaterThan(1);
  });

  it('a provider error response is one event with its status, usage_source none and cost 0', async () => {
    const f = byName('anthropic', 'error-400.json');
    const { event, events } = await runFixture(f, [f.bytes]);
    expect(events).toHaveLength(1);
    expect(event).toMatchObject({
      status: 400,
      usageSource: 'none',
      cost: ZERO_COST,
      unpriced: false,
      inputTokens: 0,
      outputTokens: 0,
      stream: false,
    });
    expect(event.model).toBe('claude-sonnet-4-5');
  });

  it('a GET of a stored response repeats its usage but charges nothing again', async () => {
    const f = byName('openai', 'responses.json');
    const get = await meter({
      slug: 'openai',
      path: 'v1/responses/resp_1',
      method: 'GET',
      status: 200,
      chunks: [f.bytes],
    });
    expect(get.event).toMatchObject({
      status: 200,
      usageSource: 'none',
      cost: ZERO_COST,
      inputTokens: 0,
      outputTokens: 0,
    });
    const post = await runFixture(f, [f.bytes]);
    expect(post.event.usageSource).toBe('provider'); // the same body from the POST that made it is charged
  });

  it("an upstream that could not be reached is an event too (the proxy's 502)", async () => {
    const { event } = await meter({
      slug: 'openai',
      path: 'v1/chat/completions',
      requestBody: { model: 'gpt-4o' },
      noHead: true,
      endStatus: 502,
    });
    expect(event).toMatchObject({
      status: 502,
      usageSource: 'none',
      cost: ZERO_COST,
      model: 'gpt-4o',
      requestedModel: 'gpt-4o',
      ttfbMs: null,
    });
  });

  it('a client that left and a provider that never answered: the prompt is estimated, never $0', async () => {
    const { event } = await meter({
      slug: 'openai',
      path: 'v1/chat/completions',
      requestBody: { model: 'gpt-4o', messages: [{ role: 'user', content: 'a prompt of some length '.repeat(40) }] },
      noHead: true,
      endStatus: 502,
      clientLeft: true,
    });
    expect(event).toMatchObject({ status: 502, usageSource: 'estimated', model: 'gpt-4o' });
    expect(event.inputTokens).toBeGreaterThan(100);
    expect(Number(event.cost)).toBeGreaterThan(0);
  });

  it('an unknown model costs 0, is flagged unpriced and counted', async () => {
    const f = byName('openai', 'chat.json');
    const body = f.bytes.toString().replace('gpt-4o-2024-08-06', 'acme-private-llm-7');
    const { event, service } = await meter({
      slug: 'openai',
      path: 'v1/chat/completions',
      requestBody: { model: 'acme-private-llm' },
      chunks: [Buffer.from(body)],
    });
    expect(event).toMatchObject({
      model: 'acme-private-llm-7',
      requestedModel: 'acme-private-llm',
      unpriced: true,
      cost: ZERO_COST,
      usageSource: 'provider',
      inputTokens: 2006,
    });
    expect(service.counters.unpriced).toBe(1);
    expect(service.counters.snapshot().unpricedModels).toEqual({ 'openai/acme-private-llm-7': 1 });
  });

  it('prices the requested model when the response names one without a price', async () => {
    const f = byName('openai', 'chat.json');
    const body = f.bytes.toString().replace('gpt-4o-2024-08-06', 'gpt-4o-internal-snapshot-zz');
    const { event } = await meter({
      slug: 'openai',
      path: 'v1/chat/completions',
      requestBody: { model: 'gpt-4o' },
      chunks: [Buffer.from(body)],
    });
    expect(event.model).toBe('gpt-4o-internal-snapshot-zz');
    expect(event.unpriced).toBe(false);
    expect(event.cost).toBe((await runFixture(f, [f.bytes])).event.cost);
  });

  it('reads a gzip-compressed body (the SDK asked for it; the client still gets it compressed)', async () => {
    for (const name of ['chat.json', 'chat-stream-usage.sse'] as const) {
      const f = byName('openai', name);
      const plain = await runFixture(f, [f.bytes]);
      const { event } = await meter({
        slug: 'openai',
        path: f.expected.request.path,
        requestBody: f.expected.request.body,
        headers: { 'content-type': contentTypes[f.kind], 'content-encoding': 'gzip' },
        chunks: randomChunks(gzipSync(f.bytes), 5, 50),
      });
      expect(event.usageSource).toBe('provider');
      expect(event.outputTokens).toBe(plain.event.outputTokens);
      expect(event.cost).toBe(plain.event.cost);
    }
  });

  it('finds the usage of a JSON body larger than the bound from its tail, with flat memory', async () => {
    const data = Array.from({ length: 3000 }, (_, i) => ({
      object: 'embedding',
      index: i,
      embedding: Array.from({ length: 200 }, () => 0.0123456789),
    }));
    const body = JSON.stringify({
      object: 'list',
      data,
      model: 'text-embedding-3-small',
      usage: { prompt_tokens: 12345, total_tokens: 12345 },
    });
    expect(body.length).toBeGreaterThan(5 << 20);
    const { event } = await meter({
      slug: 'openai',
      path: 'v1/embeddings',
      requestBody: { model: 'text-embedding-3-small', input: ['x'] },
      chunks: randomChunks(Buffer.from(body), 9, 65536),
    });
    expect(event).toMatchObject({
      usageSource: 'provider',
      inputTokens: 12345,
      outputTokens: 0,
      model: 'text-embedding-3-small',
      unpriced: false,
    });
    expect(Number(event.cost)).toBeGreaterThan(0);
  });

  it('a completed response without usage (a model list) is an event with usage_source none', async () => {
    const { event } = await meter({
      slug: 'openai',
      path: 'v1/models',
      chunks: [Buffer.from('{"object":"list","data":[]}')],
    });
    expect(event).toMatchObject({ usageSource: 'none', model: 'unknown', requestedModel: null, cost: ZERO_COST });
  });

  it('a NUL or a lone surrogate in a tag value or model (which PostgreSQL cannot store) is replaced, not a reason to lose the event', async () => {
    const f = byName('openai', 'chat.json');
    const body = f.bytes.toString().replace('gpt-4o-2024-08-06', 'gpt\\u0000x\\ud800y\\ud83d\\ude00');
    const { event } = await meter({
      slug: 'openai',
      path: 'v1/chat/completions',
      requestBody: { model: 'gpt-4o' },
      chunks: [Buffer.from(body)],
      tags: { team: 'a\u0000b' },
    });
    expect(event.tags).toEqual({ team: 'a\uFFFDb' });
    expect(event.model).toBe('gpt\uFFFDx\uFFFDy\ud83d\ude00'); // a whole pair (an emoji) stays
  });

  it("carries the call's identity, tags and timings", async () => {
    const f = byName('groq', 'stream-triple.sse');
    const { event } = await runFixture(f, [f.bytes]);
    expect(event.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(event).toMatchObject({
      accountId: '0190a8e0-0000-7000-8000-00000000000a',
      keyId: 'a1b2c3d4e5f6',
      provider: 'groq',
      tags: { team: 'search' },
      stream: true,
    });
    expect(event.ttfbMs).not.toBeNull();
    expect(event.latencyMs).toBeGreaterThanOrEqual(event.ttfbMs!);
    expect(Date.parse(event.time)).toBeGreaterThan(Date.now() - 60_000);
  });
});
