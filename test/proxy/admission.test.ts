import { beforeAll, expect, it } from 'vitest';
import type { Principal } from '../../src/auth/types.js';
import type { Admission, Admitter } from '../../src/proxy/handler.js';
import { startProxyDaemon, type ProxyDaemon } from '../helpers/proxy.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstreams.js';

/** Two calls a key, then 429: the shape of the plans' rate limit (src/plans plugs in here). */
class TwoCallsPerKey implements Admitter {
  private readonly used = new Map<string, number>();
  admit(p: Principal): Admission {
    const n = (this.used.get(p.keyId) ?? 0) + 1;
    this.used.set(p.keyId, n);
    const headers = {
      'ratelimit-limit': '2',
      'ratelimit-remaining': String(Math.max(0, 2 - n)),
      'ratelimit-reset': '60',
    };
    if (n > 2)
      return {
        ok: false,
        status: 429,
        code: 'rate_limited',
        message: 'two calls only',
        headers: { ...headers, 'retry-after': '60' },
      };
    return { ok: true, headers };
  }
}

let fake: FakeUpstream;
let proxy: ProxyDaemon;
beforeAll(async () => {
  fake = await startFakeUpstream();
  proxy = await startProxyDaemon({ upstreams: { openai: `${fake.origin}/v1` }, admission: new TwoCallsPerKey() });
});

it('admission headers go on proxied responses; a refusal is answered without calling the provider', async () => {
  const call = () => fetch(`${proxy.url}/proxy/openai/models`, { headers: { authorization: `Bearer ${proxy.key}` } });
  const first = await call();
  expect(first.status).toBe(200);
  expect(first.headers.get('ratelimit-remaining')).toBe('1');
  expect((await call()).headers.get('ratelimit-remaining')).toBe('0');
  const before = fake.requests.length;
  const third = await call();
  expect(third.status).toBe(429);
  expect(third.headers.get('retry-after')).toBe('60');
  expect(third.headers.get('ratelimit-remaining')).toBe('0');
  expect(await third.json()).toMatchObject({ error: { code: 'rate_limited', type: 'rate_limit_error' } });
  expect(fake.requests.length).toBe(before);
});
