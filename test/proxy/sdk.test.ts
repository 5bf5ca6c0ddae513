import { beforeAll, describe, expect, it } from 'vitest';
import type { ProviderSlug } from '../../src/providers/types.js';
import { RecordingMetering } from '../helpers/metering.js';
import { startProxyDaemon, type ProxyDaemon } from '../helpers/proxy.js';
import {
  sseEvents,
  startFakeUpstream,
  writeInPieces,
  type FakeUpstream,
  type SeenRequest,
} from '../helpers/upstreams.js';
import { adapters, cohereV2Chat, fixture, PROVIDER_KEY, type SdkAdapter } from './sdk-adapters.js';

/** Headers the service consumes: no provider may ever see them. */
const CONSUMED = ['x-meter-key', 'x-provider-authorization', 'x-metering-tags', 'x-feature-name', 'x-tenant-id'];

const fakes = new Map<ProviderSlug, FakeUpstream>();
const metering = new RecordingMetering();
let proxy: ProxyDaemon;

function isStreamRequest(seen: SeenRequest): boolean {
  if (seen.url.includes('streamGenerateContent')) return true;
  try {
    return JSON.parse(seen.body.toString()).stream === true;
  } catch {
    return false;
  }
}

/** Answers like the provider: the JSON fixture, or the stream fixture event by event. */
function serveLike(a: SdkAdapter, fake: FakeUpstream): void {
  fake.respond(async (_req, res, seen) => {
    const s = isStreamRequest(seen) ? a.stream : a.chat;
    const pieces = s.contentType === 'application/stream+json' ? s.body.split(/(?<=\n)/) : sseEvents(s.body);
    await writeInPieces(res, 200, s.contentType, s.contentType === 'application/json' ? [s.body] : pieces);
  });
}

beforeAll(async () => {
  const upstreams: Partial<Record<ProviderSlug, string>> = {};
  for (const a of adapters) {
    const fake = await startFakeUpstream();
    serveLike(a, fake);
    fakes.set(a.slug, fake);
    upstreams[a.slug] = `${fake.origin}${a.basePath}`;
  }
  proxy = await startProxyDaemon({ upstreams, metering });
});

function expectCleanUpstreamRequest(a: SdkAdapter, seen: SeenRequest, path: string): void {
  expect(seen.url).toBe(path);
  expect(seen.headers[a.credential[0]]).toBe(a.credential[1]);
  for (const name of CONSUMED) expect(seen.headers).not.toHaveProperty(name);
  const everything = seen.rawHeaders.join('\n') + seen.url;
  expect(everything).not.toContain(proxy.key);
  expect(everything).not.toContain(proxy.keyId);
  expect(seen.headers.host).toBe(new URL(fakes.get(a.slug)!.origin).host);
}

describe.each(adapters)('$slug through its SDK ($sdk)', (a) => {
  it.each([false, true])(
    'stream=%s: the SDK gets the result, the provider the right path and credential only',
    async (stream) => {
      const fake = fakes.get(a.slug)!;
      const before = fake.requests.length;
      const text = await a.call(proxy.url, proxy.key, stream);
      const scenario = stream ? a.stream : a.chat;
      expect(text).toBe(scenario.text);
      expect(fake.requests.length).toBe(before + 1);
      expectCleanUpstreamRequest(a, fake.requests.at(-1)!, scenario.upstreamPath);

      // The metering saw the whole call, in the documented order, with the exact bytes.
      const call = metering.calls.at(-1)!;
      expect(call.start.provider).toBe(a.slug);
      expect(call.start.principal.keyId).toBe(proxy.keyId);
      expect(call.start.tags).toMatchObject({ team: 'search', env: 'test', feature: 'chat', tenant: 't-1' });
      expect(call.steps).toEqual(['begin', 'requestBody', 'responseHead', 'responseChunk', 'end']);
      expect(call.requestBody?.equals(fake.requests.at(-1)!.body)).toBe(true);
      expect(Buffer.concat(call.chunks).toString()).toBe(scenario.body);
      expect(call.outcome).toEqual({ completed: true, status: 200 });
    },
  );
});

describe('provider specifics', () => {
  it('gemini: a key in ?key= reaches the provider unchanged', async () => {
    const fake = fakes.get('gemini')!;
    const path = `v1beta/models/gemini-2.5-flash:generateContent?key=${PROVIDER_KEY}`;
    const res = await fetch(`${proxy.url}/proxy/gemini/${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${proxy.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ contents: [{ parts: [{ text: 'Hi' }] }] }),
    });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(fixture('gemini/generate.json'));
    const seen = fake.requests.at(-1)!;
    expect(seen.url).toBe(`/${path}`);
    expect(seen.headers).not.toHaveProperty('authorization');
    expect(seen.headers).not.toHaveProperty('x-goog-api-key');
  });

  it('cohere: the v2 client on the /v1 base reaches /v2/chat', async () => {
    const fake = fakes.get('cohere')!;
    fake.respond(async (_req, res) => writeInPieces(res, 200, 'application/json', [fixture('cohere/chat-v2.json')]));
    try {
      expect(await cohereV2Chat(proxy.url, proxy.key)).toBe('Bonjour ! Comment puis-je vous aider ?');
      expect(fake.requests.at(-1)!.url).toBe('/v2/chat');
      expect(fake.requests.at(-1)!.headers.authorization).toBe(`Bearer ${PROVIDER_KEY}`);
    } finally {
      serveLike(
        adapters.find((x) => x.slug === 'cohere')!,
        fake,
      );
    }
  });

  it('anthropic: the service key as the SDK apiKey and the provider key in x-api-key', async () => {
    const { default: Anthropic } = await import('@anthropic-ai/sdk');
    const client = new Anthropic({
      apiKey: proxy.key,
      baseURL: `${proxy.url}/proxy/anthropic`,
      defaultHeaders: { 'x-api-key': PROVIDER_KEY },
      maxRetries: 0,
    });
    const m = await client.messages.create({
      model: 'claude-test-model',
      max_tokens: 64,
      messages: [{ role: 'user', content: 'Hi' }],
    });
    expect(m.content[0]).toMatchObject({ type: 'text' });
    const seen = fakes.get('anthropic')!.requests.at(-1)!;
    expect(seen.headers['x-api-key']).toBe(PROVIDER_KEY);
    expect(seen.headers['anthropic-version']).toBeDefined();
    expect(seen.headers).not.toHaveProperty('authorization');
  });

  it('a provider error reaches the SDK as the provider sent it', async () => {
    const fake = fakes.get('openai')!;
    fake.respond(async (_req, res) => writeInPieces(res, 401, 'application/json', [fixture('openai/error-401.json')]));
    try {
      const a = adapters.find((x) => x.slug === 'openai')!;
      const err = (await a.call(proxy.url, proxy.key, false).catch((e: unknown) => e)) as {
        status?: number;
        code?: string;
      };
      expect(err.status).toBe(401);
      expect(err.code).toBe(JSON.parse(fixture('openai/error-401.json')).error.code);
      expect(metering.calls.at(-1)!.outcome).toEqual({ completed: true, status: 401 });
    } finally {
      serveLike(
        adapters.find((x) => x.slug === 'openai')!,
        fake,
      );
    }
  });
});
