import OpenAI from 'openai';
import { beforeAll, describe, expect, it } from 'vitest';
import { createKey, revokeKey } from '../../src/auth/keys.js';
import { rawRequest } from '../helpers/http.js';
import { startProxyDaemon, type ProxyDaemon } from '../helpers/proxy.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstreams.js';

let fake: FakeUpstream;
let proxy: ProxyDaemon;

beforeAll(async () => {
  fake = await startFakeUpstream();
  proxy = await startProxyDaemon({
    upstreams: { openai: `${fake.origin}/v1`, anthropic: `${fake.origin}/v1` },
    env: { METER_KEY_REFRESH_MS: '200' },
  });
});

const call = (headers: Record<string, string>, path = 'openai/chat/completions') =>
  rawRequest(`${proxy.url}/proxy/${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: '{}',
  });

describe('service key on the proxy (401 invalid_api_key, provider never called)', () => {
  const wrongSecret = () => proxy.key.slice(0, -6) + 'AAAAAA';
  const cases: [string, () => Record<string, string>][] = [
    ['no key at all', () => ({})],
    ['a provider key instead', () => ({ authorization: 'Bearer sk-proj-abc' })],
    ['a malformed mk_ key', () => ({ authorization: 'Bearer mk_123' })],
    ['an unknown key', () => ({ authorization: `Bearer mk_0123456789ab_${'u'.repeat(43)}` })],
    ['a wrong secret', () => ({ authorization: `Bearer ${wrongSecret()}` })],
    [
      'a bad X-Meter-Key next to a provider Authorization',
      () => ({ 'x-meter-key': wrongSecret(), authorization: 'Bearer sk-x' }),
    ],
  ];
  it.each(cases)('%s', async (_what, headers) => {
    const before = fake.requests.length;
    const res = await call(headers());
    expect(res.status).toBe(401);
    const body = JSON.parse(res.body.toString());
    expect(body).toEqual({
      error: { type: 'authentication_error', code: 'invalid_api_key', message: expect.any(String) },
    });
    expect(res.body.toString()).not.toContain(proxy.key.slice(16)); // never echoes a key
    expect(fake.requests.length).toBe(before);
  });

  it('comes before routing: an unknown slug without a key is 401, not 404', async () => {
    expect((await call({}, 'nosuch/v1/chat')).status).toBe(401);
    expect((await call({ authorization: `Bearer ${proxy.key}` }, 'nosuch/v1/chat')).status).toBe(404);
  });

  it('the OpenAI SDK with only its provider key hears where the service key goes', async () => {
    const before = fake.requests.length;
    const providerKey = 'sk-proj-newcomer-0123456789';
    const openai = new OpenAI({ baseURL: `${proxy.url}/proxy/openai/v1`, apiKey: providerKey, maxRetries: 0 });
    const err = await openai.chat.completions
      .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
    const message = (err as InstanceType<typeof OpenAI.AuthenticationError>).message;
    expect(message).toContain('no X-Meter-Key was sent');
    expect(message).toContain('X-Meter-Key: mk_');
    expect(message).toContain('X-Provider-Authorization');
    expect(message).not.toContain(providerKey);
    expect(fake.requests.length).toBe(before);
    // A malformed service key in Authorization keeps the plain message.
    const typo = JSON.parse((await call({ authorization: 'Bearer mk_123' })).body.toString());
    expect(typo.error.message).toMatch(/^invalid service key/);
  });

  it('has Anthropic’s shape on /proxy/anthropic', async () => {
    const res = await call({ 'x-api-key': 'sk-ant' }, 'anthropic/v1/messages');
    expect(res.status).toBe(401);
    expect(JSON.parse(res.body.toString())).toEqual({
      type: 'error',
      error: { type: 'invalid_api_key', message: expect.any(String) },
    });
  });

  it('a new key works at once; a revoked one is refused at the next refresh', async () => {
    const k = await createKey(proxy.daemon.store, proxy.account, 'short-lived');
    expect((await call({ authorization: `Bearer ${k.key}` })).status).toBe(200);
    await revokeKey(proxy.daemon.store, k.id);
    const revokedAt = Date.now();
    let status = 200;
    while (status === 200 && Date.now() - revokedAt < 3_000) {
      status = (await call({ authorization: `Bearer ${k.key}` })).status;
      if (status === 200) await new Promise((r) => setTimeout(r, 50));
    }
    expect(status).toBe(401);
    expect((await call({ authorization: `Bearer ${proxy.key}` })).status).toBe(200);
  });
});
