import { gzipSync } from 'node:zlib';
import { beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import type { Daemon } from '../../src/server/daemon.js';
import { answerChat, eventually, startFullDaemon } from '../helpers/fleet.js';
import { rawRequest } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/stores.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstreams.js';
import { head, rawExchange } from './raw.js';

/**
 * The proxy as an attacker uses it: the real daemon (every component, PostgreSQL), a fake
 * provider that records what it receives, and a second host that must never receive anything.
 * Requests go out byte for byte on raw sockets, so no client normalises them first.
 */

let daemon: Daemon;
let upstream: FakeUpstream;
let other: FakeUpstream;
let key: string;
let host: string;
const otherHost = () => new URL(other.origin).host;

beforeAll(async () => {
  upstream = await startFakeUpstream();
  other = await startFakeUpstream();
  answerChat(upstream, { prompt: 10, completion: 5 });
  daemon = await startFullDaemon(await createTestDatabase(), upstream, {
    METER_UPSTREAM_GEMINI: upstream.origin, // a base address without a path of its own
    METER_MAX_HEADER_BYTES: '8192',
    METER_MAX_HEADERS: '40',
    METER_MAX_BODY_BYTES: '65536',
    METER_IDLE_TIMEOUT_MS: '1000',
    METER_MAX_DECODED_BYTES: '1048576',
  });
  await createAccount(daemon.store, 'sec', 'pro');
  key = (await createKey(daemon.store, 'sec', 'app')).key;
  host = new URL(daemon.url).host;
}, 120_000);

/** Sends one raw request; returns the reply, what the provider received meanwhile, and the
 *  error code of a JSON answer. */
async function send(bytes: string) {
  const before = upstream.requests.length;
  const reply = await rawExchange(daemon.url, bytes);
  let code: string | undefined;
  try {
    code = (JSON.parse(reply.body) as { error?: { code?: string } }).error?.code;
  } catch {
    /* not JSON */
  }
  return { ...reply, code, seen: upstream.requests.slice(before) };
}

const auth = `Authorization: Bearer `;

describe('paths never leave the provider’s base path or host', () => {
  const refused: [string, () => string][] = [
    ['..', () => '/proxy/openai/../../admin'],
    ['.. after the version', () => '/proxy/openai/v1/../../../etc/passwd'],
    ['%2e%2e%2f', () => '/proxy/openai/%2e%2e%2f%2e%2e%2fadmin'],
    ['%2E%2E segment', () => '/proxy/openai/v1/%2E%2E/secret'],
    ['.%2e', () => '/proxy/openai/.%2e/x'],
    ['. segment', () => '/proxy/openai/./v1/models'],
    ['//host (base path empty)', () => `/proxy/gemini//${otherHost()}/v1beta/models`],
    ['//host', () => `/proxy/openai//${otherHost()}/v1/models`],
    ['absolute URL in the path', () => `/proxy/openai/http://${otherHost()}/v1/models`],
    ['backslashes', () => '/proxy/openai/v1\\..\\..\\admin'],
    ['%5c', () => '/proxy/openai/v1%5c..%5cadmin'],
    ['%2f', () => '/proxy/openai/v1%2f..%2fadmin'],
    ['%00', () => '/proxy/openai/v1/models%00.json'],
  ];
  it.each(refused)('%s: 400 invalid_path, nothing forwarded', async (_name, target) => {
    const r = await send(head('GET', target(), host, [`${auth}${key}`]));
    expect(r.status).toBe(400);
    expect(r.code).toBe('invalid_path');
    expect(r.seen).toEqual([]);
  });

  it('CRLF in the request line only ends it: the rest is a header of the client’s own, the call stays on the provider', async () => {
    const r = await send(
      `GET /proxy/openai/v1/mo\r\nX-Injected: 1 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n${auth}${key}\r\n\r\n`,
    );
    expect(r.seen.map((s) => s.url)).toEqual(r.status === 400 ? [] : ['/v1/mo']);
  });

  it.each([
    ['NUL in the request line', `GET /proxy/openai/v1/mo\0dels HTTP/1.1\r\nHost: h\r\n${auth}KEY\r\n\r\n`],
    [
      'CRLF in a header value',
      `GET /proxy/openai/v1/models HTTP/1.1\r\nHost: h\r\n${auth}KEY\r\nX-A: a\rX-Injected: 1\r\n\r\n`,
    ],
  ])('%s: 400 bad_request before anything else', async (_name, bytes) => {
    const r = await send(bytes.replace('KEY', key));
    expect(r.status).toBe(400);
    expect(r.code).toBe('bad_request');
    expect(r.seen).toEqual([]);
  });

  it('an absolute-form request target is not routed: 404, nothing forwarded', async () => {
    const r = await send(head('GET', `http://${otherHost()}/v1/models`, otherHost(), [`${auth}${key}`]));
    expect(r.status).toBe(404);
    expect(r.seen).toEqual([]);
  });

  it('@host, encoded CRLF and a foreign Host header stay on the provider, under its base path', async () => {
    const at = await send(head('GET', `/proxy/openai/@${otherHost()}/v1/models`, host, [`${auth}${key}`]));
    expect(at.status).toBe(200);
    expect(at.seen.map((s) => s.url)).toEqual([`/v1/@${otherHost()}/v1/models`]);

    const crlf = await send(head('GET', '/proxy/openai/v1/models%0d%0aX-Injected:%201', host, [`${auth}${key}`]));
    expect(crlf.status).toBe(200);
    expect(crlf.seen.map((s) => s.url)).toEqual(['/v1/models%0d%0aX-Injected:%201']);
    expect(crlf.seen[0]!.headers['x-injected']).toBeUndefined();

    const foreign = await send(
      `GET /proxy/openai/v1/models HTTP/1.1\r\nHost: ${otherHost()}\r\nConnection: close\r\n${auth}${key}\r\n\r\n`,
    );
    expect(foreign.status).toBe(200);
    expect(foreign.seen[0]!.headers.host).toBe(new URL(upstream.origin).host);
  });

  it('the second host never received anything', () => {
    expect(other.requests).toEqual([]);
  });
});

describe('request smuggling', () => {
  const body = '{"model":"gpt-4o","messages":[]}';
  it.each([
    ['Content-Length with Transfer-Encoding', [`Content-Length: ${body.length}`, 'Transfer-Encoding: chunked']],
    ['two different Content-Lengths', [`Content-Length: ${body.length}`, 'Content-Length: 5']],
    ['a Transfer-Encoding that is not chunked', ['Transfer-Encoding: gzip']],
    ['whitespace before the colon', [`Transfer-Encoding : chunked`, `Content-Length: ${body.length}`]],
  ])('%s: 400 bad_request, nothing forwarded', async (_name, lines) => {
    const r = await send(head('POST', '/proxy/openai/v1/chat/completions', host, [`${auth}${key}`, ...lines], body));
    expect(r.status).toBe(400);
    expect(r.code).toBe('bad_request');
    expect(r.seen).toEqual([]);
  });

  it('a chunked body reaches the provider whole, framed one way only', async () => {
    const chunked = `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
    const r = await send(
      head('POST', '/proxy/openai/v1/chat/completions', host, [`${auth}${key}`, 'Transfer-Encoding: chunked'], chunked),
    );
    expect(r.status).toBe(200);
    expect(r.seen).toHaveLength(1);
    expect(r.seen[0]!.body.toString()).toBe(body);
    const h = r.seen[0]!.headers;
    expect(h['content-length'] !== undefined && h['transfer-encoding'] !== undefined).toBe(false);
  });
});

describe('no credential of the service is ever forwarded', () => {
  const k = () => key;
  const cases: [string, () => string[], string | undefined][] = [
    ['AUTHORIZATION in capitals', () => [`AUTHORIZATION: Bearer ${k()}`], undefined],
    ['lower-case bearer', () => [`authorization: bearer ${k()}`], undefined],
    [
      'X-METER-KEY with a provider Authorization',
      () => [`X-METER-KEY: ${k()}`, 'Authorization: Bearer sk-provider'],
      'Bearer sk-provider',
    ],
    [
      'x-meter-key and the service key in Authorization too',
      () => [`x-meter-key: ${k()}`, `Authorization: Bearer ${k()}`],
      undefined,
    ],
    [
      'the service key as X-Provider-Authorization',
      () => [`X-Meter-Key: ${k()}`, `X-Provider-Authorization: Bearer ${k()}`],
      undefined,
    ],
    ['the service key as x-api-key', () => [`X-Meter-Key: ${k()}`, `x-api-key: ${k()}`], undefined],
    ['Authorization twice', () => [`Authorization: Bearer ${k()}`, 'Authorization: Bearer sk-second'], undefined],
    [
      'X-Meter-Key, then Authorization twice',
      () => [`X-Meter-Key: ${k()}`, `Authorization: Bearer ${k()}`, 'authorization: Bearer sk-provider'],
      'Bearer sk-provider',
    ],
    ['in a cookie', () => [`X-Meter-Key: ${k()}`, `Cookie: session=${k()}`], undefined],
    ['in a header named by Connection', () => [`X-Meter-Key: ${k()}`, 'Connection: close, x-meter-key'], undefined],
  ];
  it.each(cases)('%s', async (_name, lines, providerAuth) => {
    const r = await send(head('GET', '/proxy/openai/v1/models', host, lines()));
    expect(r.status).toBe(200);
    expect(r.seen).toHaveLength(1);
    const seen = r.seen[0]!;
    const everything = `${seen.url} ${seen.rawHeaders.join('\n')} ${seen.body.toString()}`;
    expect(everything).not.toContain('mk_');
    expect(seen.headers.authorization).toBe(providerAuth);
  });

  it('X-Meter-Key twice is no key: 401, nothing forwarded', async () => {
    const r = await send(head('GET', '/proxy/openai/v1/models', host, [`X-Meter-Key: ${key}`, `x-meter-key: ${key}`]));
    expect(r.status).toBe(401);
    expect(r.seen).toEqual([]);
  });
});

describe('tag headers', () => {
  const post = (lines: string[]) =>
    send(
      head(
        'POST',
        '/proxy/openai/v1/chat/completions',
        host,
        [`${auth}${key}`, 'Content-Type: application/json', 'Content-Length: 2', ...lines],
        '{}',
      ),
    );

  it.each([
    ['21 tags', () => `X-Metering-Tags: ${Array.from({ length: 21 }, (_, i) => `k${i}=v`).join(',')}`],
    ['a 257-character value', () => `X-Metering-Tags: team=${'a'.repeat(257)}`],
    ['a key outside the allowed characters', () => 'X-Metering-Tags: te$am=x'],
    ['a nested JSON value', () => 'X-Metering-Tags: {"team":{"a":"b"}}'],
    ['an encoded NUL', () => 'X-Metering-Tags: team=a%00b'],
    ['a JSON NUL', () => 'X-Metering-Tags: {"team":"a\\u0000b"}'],
    ['an unpaired surrogate', () => 'X-Metering-Tags: {"team":"\\ud800"}'],
    ['a malformed percent-encoding', () => 'X-Metering-Tags: team=%E0%A4%A'],
    ['an empty value', () => 'X-Tenant-ID: '],
  ])('%s: 400 invalid_tags, nothing forwarded', async (_name, line) => {
    const r = await post([line()]);
    expect(r.status).toBe(400);
    expect(r.code).toBe('invalid_tags');
    expect(r.seen).toEqual([]);
  });

  it('a tag header over the header limit: 431, nothing forwarded', async () => {
    const r = await post([`X-Metering-Tags: team=${'a'.repeat(9000)}`]);
    expect(r.status).toBe(431);
    expect(r.code).toBe('headers_too_large');
    expect(r.seen).toEqual([]);
  });

  it('more headers than METER_MAX_HEADERS: 431, nothing forwarded', async () => {
    const r = await post(Array.from({ length: 41 }, (_, i) => `X-Pad-${i}: x`));
    expect(r.status).toBe(431);
    expect(r.code).toBe('headers_too_large');
    expect(r.seen).toEqual([]);
  });

  it('SQL in a tag value and in the model is stored as text, and the tables stay', async () => {
    const evil = "x'); DROP TABLE usage_events; --";
    const body = JSON.stringify({ model: `gpt-4o'; DELETE FROM accounts; --\u0000`, messages: [] });
    upstream.respond((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"id":"x","object":"chat.completion","choices":[]}'); // no model, no usage: the requested one is stored
    });
    const r = await send(
      head(
        'POST',
        '/proxy/openai/v1/chat/completions',
        host,
        [
          `${auth}${key}`,
          `X-Metering-Tags: team=${encodeURIComponent(evil)}`,
          'Content-Type: application/json',
          `Content-Length: ${Buffer.byteLength(body)}`,
        ],
        body,
      ),
    );
    answerChat(upstream, { prompt: 10, completion: 5 });
    expect(r.status).toBe(200);
    const id = /x-meter-request-id: (\S+)/i.exec(r.head)![1]!;
    await eventually(
      async () => (await daemon.store.query('SELECT 1 FROM usage_events WHERE event_id = $1', [id])).length === 1,
      10_000,
      'event stored',
    );
    const [row] = await daemon.store.query<{ tags: Record<string, string>; requested_model: string }>(
      'SELECT tags, requested_model FROM usage_events WHERE event_id = $1',
      [id],
    );
    expect(row!.tags).toEqual({ team: evil });
    // Stored as text (a NUL, which PostgreSQL cannot hold, is replaced), not refused.
    expect(row!.requested_model.startsWith("gpt-4o'; DELETE FROM accounts; --")).toBe(true);
    expect(row!.requested_model).not.toContain('\u0000');
    expect((await daemon.store.query('SELECT count(*)::int AS n FROM accounts'))[0]).toEqual({ n: 1 });
  });
});

describe('bodies, bombs and slow providers', () => {
  it('a body over METER_MAX_BODY_BYTES: 413 before anything is forwarded (Content-Length) or as soon as it passes the limit (chunked)', async () => {
    const big = 'x'.repeat(70_000);
    const declared = await send(
      head('POST', '/proxy/openai/v1/chat/completions', host, [`${auth}${key}`, `Content-Length: ${big.length}`], big),
    );
    expect(declared.status).toBe(413);
    expect(declared.code).toBe('request_too_large');
    expect(declared.seen).toEqual([]);

    upstream.respond(async (req, res) => {
      for await (const _ of req) {
        /* read it all, as a provider would */
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
    const chunk = 'y'.repeat(16_384);
    const chunks =
      Array.from({ length: 5 }, () => `${chunk.length.toString(16)}\r\n${chunk}\r\n`).join('') + '0\r\n\r\n';
    const streamed = await send(
      head('POST', '/proxy/openai/v1/chat/completions', host, [`${auth}${key}`, 'Transfer-Encoding: chunked'], chunks),
    );
    answerChat(upstream, { prompt: 10, completion: 5 });
    expect(streamed.status).toBe(413);
    expect(streamed.code).toBe('request_too_large');
    // The provider got at most the limit, never the whole body.
    expect(streamed.seen.every((s) => s.body.length <= 65_536)).toBe(true);
  });

  it('a gzip bomb: the client gets the provider’s bytes, decoding stops at the cap (CPU stays low), the call is metered as estimated', async () => {
    // 256 gzip members of 16 MiB of spaces each: 4 GiB once inflated, about 4 MiB on the wire.
    const member = gzipSync(Buffer.alloc(16 << 20, 0x20));
    const bomb = Buffer.concat(Array.from({ length: 256 }, () => member));
    upstream.respond((_req, res) => {
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-encoding': 'gzip',
        'content-length': bomb.length,
      });
      res.end(bomb);
    });
    const cpu0 = process.cpuUsage();
    const res = await rawRequest(`${daemon.url}/proxy/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'accept-encoding': 'gzip', 'content-type': 'application/json' },
      body: '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}',
    });
    const cpu = process.cpuUsage(cpu0);
    answerChat(upstream, { prompt: 10, completion: 5 });
    expect(res.status).toBe(200);
    expect(res.body.equals(bomb)).toBe(true);
    const id = res.headers['x-meter-request-id'] as string;
    await eventually(
      async () => (await daemon.store.query('SELECT 1 FROM usage_events WHERE event_id = $1', [id])).length === 1,
      30_000,
      'event stored',
    );
    const [row] = await daemon.store.query<{ usage_source: string }>(
      'SELECT usage_source FROM usage_events WHERE event_id = $1',
      [id],
    );
    expect(row!.usage_source).toBe('estimated');
    // Inflating 4 GiB takes several CPU seconds; stopping at the 1 MiB cap takes next to none
    // (this process runs the daemon, the provider and the client).
    expect((cpu.user + cpu.system) / 1000).toBeLessThan(2_000);
  });

  it('a provider that never answers: 504 upstream_timeout after METER_IDLE_TIMEOUT_MS; one that stalls mid-stream: the connection is cut', async () => {
    upstream.respond(() => new Promise<void>(() => {})); // never answers
    const silent = await send(head('GET', '/proxy/openai/v1/models', host, [`${auth}${key}`]));
    expect(silent.status).toBe(504);
    expect(silent.code).toBe('upstream_timeout');

    upstream.respond((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"choices":[]}\n\n'); // then nothing, forever
    });
    const t0 = Date.now();
    const stalled = await rawExchange(
      daemon.url,
      head(
        'POST',
        '/proxy/openai/v1/chat/completions',
        host,
        [`${auth}${key}`, 'Content-Type: application/json', 'Content-Length: 2'],
        '{}',
      ),
      8_000,
    );
    answerChat(upstream, { prompt: 10, completion: 5 });
    expect(stalled.status).toBe(200);
    expect(stalled.body).toContain('data: {"choices":[]}');
    expect(Date.now() - t0).toBeLessThan(6_000); // cut by the idle timeout, not by our 8 s read limit
  });

  it('an endless provider stream is relayed while the client reads, and stops when it leaves', async () => {
    let stopped = false;
    upstream.respond((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const timer = setInterval(() => res.write('data: {"choices":[{"delta":{"content":"x"}}]}\n\n'), 5);
      res.on('close', () => {
        clearInterval(timer);
        stopped = true;
      });
    });
    const controller = new AbortController();
    const res = await fetch(`${daemon.url}/proxy/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: '{"model":"gpt-4o-mini","stream":true}',
      signal: controller.signal,
    });
    const reader = res.body!.getReader();
    for (let i = 0; i < 5; i++) await reader.read();
    controller.abort();
    await eventually(async () => stopped, 5_000, 'the provider connection closed');
    answerChat(upstream, { prompt: 10, completion: 5 });
  });
});
