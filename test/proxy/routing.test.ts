import { beforeAll, describe, expect, it } from 'vitest';
import { buildTargets, upstreamPath } from '../../src/proxy/targets.js';
import { rawRequest } from '../helpers/http.js';
import { startProxyDaemon, type ProxyDaemon } from '../helpers/proxy.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstreams.js';

describe('upstream path (CONTRACT §2)', () => {
  const defaults = buildTargets({ upstreams: {} });
  const cases: [slug: string, rest: string, expected: string][] = [
    // what each official SDK sends after /proxy/{slug}/
    ['openai', 'chat/completions', '/v1/chat/completions'],
    ['openai', 'v1/chat/completions', '/v1/chat/completions'],
    ['anthropic', 'v1/messages', '/v1/messages'],
    ['groq', 'openai/v1/chat/completions', '/openai/v1/chat/completions'],
    [
      'gemini',
      'v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse',
      '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse',
    ],
    ['mistral', 'v1/chat/completions', '/v1/chat/completions'],
    ['together', 'chat/completions', '/v1/chat/completions'],
    ['cohere', 'v1/chat', '/v1/chat'],
    ['deepseek', 'chat/completions', '/chat/completions'],
    ['xai', 'chat/completions', '/v1/chat/completions'],
    // another version segment replaces the base's own
    ['cohere', 'v2/chat', '/v2/chat'],
    ['groq', 'v1/models', '/openai/v1/models'],
    ['openai', 'v1beta/things', '/v1beta/things'],
    // not a version segment, nor the base's own path: appended
    ['openai', 'v1x/y', '/v1/v1x/y'],
    ['openai', 'v10', '/v10'],
    ['deepseek', 'v1/chat/completions', '/v1/chat/completions'],
    // nothing after the slug, or only a query
    ['openai', '', '/v1'],
    ['openai', '?a=1', '/v1?a=1'],
    ['openai', 'v1?a=1', '/v1?a=1'],
    ['gemini', '', '/'],
  ];
  it.each(cases)('%s + %j → %s', (slug, rest, expected) => {
    expect(upstreamPath(defaults.get(slug)!, rest)).toBe(expected);
  });

  it('the base address comes from METER_UPSTREAM_<SLUG> when set, path included', () => {
    const t = buildTargets({ upstreams: { cohere: 'http://127.0.0.1:9/custom/v1' } }).get('cohere')!;
    expect(t.origin).toBe('http://127.0.0.1:9');
    expect(upstreamPath(t, 'v1/chat')).toBe('/custom/v1/chat');
    expect(upstreamPath(t, 'v2/chat')).toBe('/custom/v2/chat');
    expect(upstreamPath(t, 'chat')).toBe('/custom/v1/chat');
    expect(defaults.get('groq')!.origin).toBe('https://api.groq.com');
  });
});

describe('forwarding', () => {
  let fake: FakeUpstream;
  let proxy: ProxyDaemon;
  beforeAll(async () => {
    fake = await startFakeUpstream();
    fake.respond((req, res, seen) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(req.method === 'HEAD' ? undefined : JSON.stringify({ method: seen.method, body: seen.body.toString() }));
    });
    proxy = await startProxyDaemon({ upstreams: { openai: `${fake.origin}/v1`, anthropic: `${fake.origin}/v1` } });
  });
  const auth = () => ({ authorization: `Bearer ${proxy.key}` });

  it.each(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])('%s is forwarded with its body', async (method) => {
    const body = method === 'GET' ? undefined : `payload of ${method}`;
    const headers = {
      ...auth(),
      'content-type': 'text/plain',
      ...(body ? { 'content-length': Buffer.byteLength(body) } : {}),
    };
    const res = await rawRequest(`${proxy.url}/proxy/openai/files/f1`, { method, headers, body });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body.toString())).toEqual({ method, body: body ?? '' });
    expect(fake.requests.at(-1)!.url).toBe('/v1/files/f1');
  });

  it('HEAD is forwarded', async () => {
    const res = await rawRequest(`${proxy.url}/proxy/openai/models`, { method: 'HEAD', headers: auth() });
    expect(res.status).toBe(200);
    expect(fake.requests.at(-1)!.method).toBe('HEAD');
  });

  it('the query string is forwarded byte for byte', async () => {
    const query = '?key=AIza%2Fx&alt=sse&a=1&a=2&q=%E2%9C%93&empty=&flag';
    await rawRequest(`${proxy.url}/proxy/openai/models${query}`, { headers: auth() });
    expect(fake.requests.at(-1)!.url).toBe(`/v1/models${query}`);
  });

  it('a request body is forwarded byte for byte (chunked upload included)', async () => {
    const body = Buffer.from([0, 1, 2, 0xff, 0xfe, 0x7b]);
    await rawRequest(`${proxy.url}/proxy/openai/x`, {
      method: 'POST',
      headers: { ...auth(), 'transfer-encoding': 'chunked' },
      body,
    });
    expect(fake.requests.at(-1)!.body.equals(body)).toBe(true);
  });

  it('an unknown slug is 404 unknown_provider and nothing is forwarded', async () => {
    const before = fake.requests.length;
    const res = await rawRequest(`${proxy.url}/proxy/nosuch/v1/chat`, { method: 'POST', headers: auth(), body: '{}' });
    expect(res.status).toBe(404);
    expect(JSON.parse(res.body.toString()).error).toMatchObject({ code: 'unknown_provider', type: 'not_found_error' });
    const bare = await rawRequest(`${proxy.url}/proxy/`, { headers: auth() });
    expect(bare.status).toBe(404);
    expect(fake.requests.length).toBe(before);
  });

  it('a path without /proxy/ is 404 not_found that says where proxied paths start', async () => {
    const res = await rawRequest(`${proxy.url}/openai/v1/chat/completions`, {
      method: 'POST',
      headers: auth(),
      body: '{}',
    });
    expect(res.status).toBe(404);
    const { error } = JSON.parse(res.body.toString()) as { error: { code: string; message: string } };
    expect(error.code).toBe('not_found');
    expect(error.message).toContain('proxied paths start with /proxy/<slug>/');
    expect(error.message).toContain('did you mean /proxy/openai/v1/chat/completions?');
    const other = JSON.parse((await rawRequest(`${proxy.url}/v1/chat/completions`)).body.toString());
    expect(other.error.message).toContain('proxied paths start with /proxy/<slug>/ (e.g. /proxy/openai/');
  });

  it('bad tags are 400 invalid_tags (Anthropic shape on /proxy/anthropic) and nothing is forwarded', async () => {
    const before = fake.requests.length;
    const res = await rawRequest(`${proxy.url}/proxy/openai/chat/completions`, {
      method: 'POST',
      headers: { ...auth(), 'x-metering-tags': 'bad key=1' },
      body: '{}',
    });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body.toString()).error.code).toBe('invalid_tags');
    const a = await rawRequest(`${proxy.url}/proxy/anthropic/v1/messages`, {
      method: 'POST',
      headers: { ...auth(), 'x-metering-tags': '{"team": 5}' },
      body: '{}',
    });
    expect(a.status).toBe(400);
    expect(JSON.parse(a.body.toString())).toMatchObject({ type: 'error', error: { type: 'invalid_tags' } });
    expect(fake.requests.length).toBe(before);
  });
});
