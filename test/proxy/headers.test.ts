import { beforeAll, describe, expect, it } from 'vitest';
import { upstreamRequestHeaders } from '../../src/proxy/headers.js';
import { rawRequest } from '../helpers/http.js';
import { RecordingMetering } from '../helpers/metering.js';
import { startProxyDaemon, type ProxyDaemon } from '../helpers/proxy.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstreams.js';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const PROVIDER_AUTH = 'Bearer sk-provider-own';

let fake: FakeUpstream;
let proxy: ProxyDaemon;
const metering = new RecordingMetering();

beforeAll(async () => {
  fake = await startFakeUpstream();
  proxy = await startProxyDaemon({ upstreams: { openai: `${fake.origin}/v1` }, metering });
});

const call = (headers: string[]) =>
  rawRequest(`${proxy.url}/proxy/openai/chat/completions`, { method: 'POST', headers, body: '{}' });
const seenNames = () =>
  fake.requests
    .at(-1)!
    .rawHeaders.filter((_, i) => i % 2 === 0)
    .map((n) => n.toLowerCase());

describe('request headers (CONTRACT §2)', () => {
  it('the service key in Authorization is required and never forwarded', async () => {
    const res = await call(['Authorization', `Bearer ${proxy.key}`, 'Content-Length', '2']);
    expect(res.status).toBe(200);
    expect(fake.requests.at(-1)!.headers).not.toHaveProperty('authorization');
  });

  it('with X-Meter-Key, Authorization is the provider credential and is forwarded unchanged', async () => {
    await call(['X-Meter-Key', proxy.key, 'Authorization', PROVIDER_AUTH, 'Content-Length', '2']);
    const seen = fake.requests.at(-1)!;
    expect(seen.headers.authorization).toBe(PROVIDER_AUTH);
    expect(seen.headers).not.toHaveProperty('x-meter-key');
  });

  it('X-Provider-Authorization becomes Authorization and wins, and is not forwarded under its own name', async () => {
    await call([
      'Authorization',
      `Bearer ${proxy.key}`,
      'X-Provider-Authorization',
      PROVIDER_AUTH,
      'Content-Length',
      '2',
    ]);
    expect(fake.requests.at(-1)!.headers.authorization).toBe(PROVIDER_AUTH);
    await call([
      'X-Meter-Key',
      proxy.key,
      'Authorization',
      'Bearer loser',
      'X-Provider-Authorization',
      PROVIDER_AUTH,
      'Content-Length',
      '2',
    ]);
    const seen = fake.requests.at(-1)!;
    expect(seen.rawHeaders.filter((h) => h.toLowerCase() === 'authorization')).toHaveLength(1);
    expect(seen.headers.authorization).toBe(PROVIDER_AUTH);
    expect(seen.headers).not.toHaveProperty('x-provider-authorization');
  });

  it('a service key never goes upstream, even in Authorization next to X-Meter-Key', async () => {
    await call(['X-Meter-Key', proxy.key, 'Authorization', `Bearer ${proxy.key}`, 'Content-Length', '2']);
    expect(fake.requests.at(-1)!.rawHeaders.join('\n')).not.toContain(proxy.key);
  });

  it('tagging headers are consumed, and reach the metering as tags', async () => {
    await call([
      'Authorization',
      `Bearer ${proxy.key}`,
      'X-Metering-Tags',
      'team=search,feature=old',
      'X-Feature-Name',
      'chat',
      'X-Tenant-ID',
      'acme',
      'Content-Length',
      '2',
    ]);
    for (const n of ['x-metering-tags', 'x-feature-name', 'x-tenant-id']) expect(seenNames()).not.toContain(n);
    expect(metering.calls.at(-1)!.start.tags).toEqual({ team: 'search', feature: 'chat', tenant: 'acme' });
  });

  it('hop-by-hop headers, and those named in Connection, are not forwarded; host is the upstream', async () => {
    await call([
      'Authorization',
      `Bearer ${proxy.key}`,
      'Connection',
      'keep-alive, X-Hop',
      'X-Hop',
      '1',
      'Keep-Alive',
      'timeout=5',
      'TE',
      'trailers',
      'Proxy-Authorization',
      'Basic eDp5',
      'Proxy-Connection',
      'keep-alive',
      'Host',
      'meter.local',
      'Content-Length',
      '2',
    ]);
    const names = seenNames();
    for (const n of ['x-hop', 'keep-alive', 'te', 'proxy-authorization', 'proxy-connection'])
      expect(names).not.toContain(n);
    expect(fake.requests.at(-1)!.headers.host).toBe(new URL(fake.origin).host);
  });

  it('every other header passes unchanged: name case, order and repeats', async () => {
    await call([
      'Authorization',
      `Bearer ${proxy.key}`,
      'X-Api-Key',
      'k1',
      'anthropic-beta',
      'b1',
      'X-Multi',
      'a',
      'X-Multi',
      'b',
      'User-Agent',
      'sdk/1.0',
      'Accept-Encoding',
      'gzip',
      'Content-Type',
      'application/json',
      'Content-Length',
      '2',
    ]);
    const raw = fake.requests.at(-1)!.rawHeaders;
    const pairs = [];
    for (let i = 0; i < raw.length; i += 2) pairs.push(`${raw[i]}: ${raw[i + 1]}`);
    expect(pairs).toEqual(
      expect.arrayContaining([
        'X-Api-Key: k1',
        'anthropic-beta: b1',
        'X-Multi: a',
        'X-Multi: b',
        'User-Agent: sdk/1.0',
        'Accept-Encoding: gzip',
        'Content-Type: application/json',
      ]),
    );
    expect(pairs.indexOf('X-Multi: a')).toBeLessThan(pairs.indexOf('X-Multi: b'));
  });

  it('Upgrade, Trailer and Transfer-Encoding are hop-by-hop too (checked on the header rule itself)', () => {
    const out = upstreamRequestHeaders(
      {
        rawHeaders: [
          'Upgrade',
          'h2c',
          'Trailer',
          'X-T',
          'Transfer-Encoding',
          'chunked',
          'Expect',
          '100-continue',
          'X-Keep',
          '1',
        ],
        headers: {},
      },
      false,
    );
    expect(out).toEqual(['X-Keep', '1']);
  });
});

describe('response headers', () => {
  it('pass unchanged minus hop-by-hop ones, with status text, plus X-Meter-Request-Id (the event id)', async () => {
    fake.respond((_req, res) => {
      res.writeHead(
        201,
        'Made It',
        [
          ['Content-Type', 'application/json'],
          ['X-Provider-Thing', 'v'],
          ['Set-Cookie', 'a=1'],
          ['Set-Cookie', 'b=2'],
          ['Connection', 'X-Resp-Hop'],
          ['X-Resp-Hop', '1'],
          ['Keep-Alive', 'timeout=9'],
          ['Proxy-Authenticate', 'Basic'],
          ['openai-processing-ms', '12'],
        ].flat(),
      );
      res.end('{"id":1}');
    });
    const res = await call(['Authorization', `Bearer ${proxy.key}`, 'Content-Length', '2']);
    expect(res.status).toBe(201);
    expect(res.statusMessage).toBe('Made It');
    expect(res.body.toString()).toBe('{"id":1}');
    expect(res.headers['x-provider-thing']).toBe('v');
    expect(res.headers['openai-processing-ms']).toBe('12');
    expect(res.headers['set-cookie']).toEqual(['a=1', 'b=2']);
    for (const n of ['x-resp-hop', 'proxy-authenticate']) expect(res.headers).not.toHaveProperty(n);
    expect(res.headers['keep-alive']).not.toBe('timeout=9');
    const id = res.headers['x-meter-request-id'] as string;
    expect(id).toMatch(UUID_V7);
    expect(metering.calls.at(-1)!.start.id).toBe(id);
  });
});
