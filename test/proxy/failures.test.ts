import { createServer, request, type ClientRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Metering } from '../../src/metering/types.js';
import { RecordingMetering } from '../helpers/metering.js';
import { startProxyDaemon, type ProxyDaemon } from '../helpers/proxy.js';
import { startFakeUpstream, startUnansweredListener, type FakeUpstream } from '../helpers/upstreams.js';

/** A port nothing listens on (bound, then closed). */
async function closedPortOrigin(): Promise<string> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return `http://127.0.0.1:${port}`;
}

let fake: FakeUpstream;
let proxy: ProxyDaemon;
const metering = new RecordingMetering();
let closeUnanswered = () => {};
afterAll(() => closeUnanswered());

beforeAll(async () => {
  fake = await startFakeUpstream({ readBody: false });
  const closed = await closedPortOrigin();
  const unanswered = await startUnansweredListener();
  closeUnanswered = unanswered.close;
  proxy = await startProxyDaemon({
    upstreams: {
      openai: `${fake.origin}/v1`,
      groq: `${closed}/openai/v1`,
      anthropic: `${closed}/v1`,
      mistral: `${unanswered.origin}/v1`,
    },
    env: { METER_IDLE_TIMEOUT_MS: '1000', METER_CONNECT_TIMEOUT_MS: '300' },
    metering,
  });
});

const post = (slug: string, path = 'chat/completions', init: RequestInit = {}) =>
  fetch(`${proxy.url}/proxy/${slug}/${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${proxy.key}` },
    body: '{}',
    ...init,
  });

describe('upstream failures', () => {
  it('an unreachable provider is 502 upstream_unreachable, metered as a failed call', async () => {
    const res = await post('groq');
    expect(res.status).toBe(502);
    const id = res.headers.get('x-meter-request-id')!;
    expect(await res.json()).toMatchObject({ error: { code: 'upstream_unreachable', type: 'api_error' } });
    const call = await metering.ended(id);
    expect(call.outcome).toEqual({ completed: false, status: 502 });
    expect(call.steps).toEqual(['begin', 'requestBody', 'end']);
  });

  it('on /proxy/anthropic the error has Anthropic’s shape', async () => {
    const res = await post('anthropic', 'v1/messages');
    expect(res.status).toBe(502);
    expect(await res.json()).toMatchObject({ type: 'error', error: { type: 'upstream_unreachable' } });
  });

  it('a connect timeout is 504 upstream_timeout', async () => {
    const started = Date.now();
    const res = await post('mistral', 'v1/chat/completions');
    expect(res.status).toBe(504);
    expect(await res.json()).toMatchObject({ error: { code: 'upstream_timeout' } });
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('a provider silent before its response head is 504 after the idle timeout', async () => {
    fake.respond((req) => void req.resume()); // never answers
    const res = await post('openai');
    expect(res.status).toBe(504);
    expect(await res.json()).toMatchObject({ error: { code: 'upstream_timeout' } });
  });

  it('a provider silent mid-stream: the client connection is ended', async () => {
    fake.respond((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"n":1}\n\n'); // …and nothing more
    });
    const res = await post('openai');
    expect(res.status).toBe(200);
    const id = res.headers.get('x-meter-request-id')!;
    await expect(res.text()).rejects.toThrow();
    expect((await metering.ended(id)).outcome).toEqual({ completed: false, status: 200 });
  });

  /** A call over node:http without an agent (its only connection is this call's: leaving closes
   *  it), resolved at the first bytes of the answer. */
  const leaving = (method: string) =>
    new Promise<{ req: ClientRequest; id: string }>((resolve, reject) => {
      const r = request(
        `${proxy.url}/proxy/openai/chat/completions`,
        {
          method,
          agent: false,
          headers: { authorization: `Bearer ${proxy.key}`, ...(method === 'POST' ? { 'content-length': 2 } : {}) },
        },
        (response) =>
          response.once('data', () => resolve({ req: r, id: response.headers['x-meter-request-id'] as string })),
      );
      r.on('error', reject);
      r.end(method === 'POST' ? '{}' : undefined);
    });

  it('a client that disconnects after its request was forwarded: the answer is still read and metered', async () => {
    let finish!: () => void;
    const rest = new Promise<void>((r) => (finish = r));
    fake.respond(async (req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"n":1}\n\n'); // then waits, as a thinking model does
      await rest;
      res.end('data: {"n":2,"usage":{"prompt_tokens":7,"completion_tokens":9}}\n\ndata: [DONE]\n\n');
    });
    const upstreamRequest = fake.nextRequest();
    const { req, id } = await leaving('POST');
    const seen = await upstreamRequest;
    req.on('error', () => {});
    req.destroy();
    await new Promise((r) => setTimeout(r, 200));
    expect(seen.aborted).toBe(false); // the provider goes on: it has the prompt and bills it
    finish();
    const call = await metering.ended(id);
    expect(call.outcome).toEqual({ completed: true, status: 200, clientLeft: true });
    expect(Buffer.concat(call.chunks).toString()).toContain('"completion_tokens":9');
    expect(seen.aborted).toBe(false);
  });

  it('a stream its client left is read on briefly, then closed and metered from what arrived', async () => {
    fake.respond((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const timer = setInterval(() => res.write('data: {"choices":[{"delta":{"content":"x"}}]}\n\n'), 20);
      res.on('close', () => clearInterval(timer));
    });
    const upstreamRequest = fake.nextRequest();
    const { req, id } = await leaving('POST');
    const seen = await upstreamRequest;
    req.on('error', () => {});
    req.destroy();
    await new Promise((r) => setTimeout(r, 500));
    expect(seen.aborted).toBe(false); // read on: the usage may be about to arrive
    const call = await metering.ended(id); // the provider would generate on for nobody: cut
    expect(call.outcome).toEqual({ completed: false, status: 200, clientLeft: true });
    for (let i = 0; i < 40 && !seen.aborted; i++) await new Promise((r) => setTimeout(r, 50));
    expect(seen.aborted).toBe(true);
    expect(Buffer.concat(call.chunks).toString()).toContain('"content":"x"');
  });

  it('a client that leaves before the answer: the provider still answers, and it is metered', async () => {
    let finish!: () => void;
    const rest = new Promise<void>((r) => (finish = r));
    fake.respond(async (req, res) => {
      req.resume();
      await rest;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"usage":{"prompt_tokens":7,"completion_tokens":9}}');
    });
    const upstreamRequest = fake.nextRequest();
    const r = request(`${proxy.url}/proxy/openai/chat/completions`, {
      method: 'POST',
      agent: false,
      headers: { authorization: `Bearer ${proxy.key}`, 'content-length': 2 },
    });
    r.on('error', () => {});
    r.end('{}');
    const seen = await upstreamRequest;
    r.destroy();
    await new Promise((res) => setTimeout(res, 200));
    finish();
    expect(seen.aborted).toBe(false);
    const last = () => metering.calls.at(-1)!;
    for (let i = 0; i < 100 && !last().outcome; i++) await new Promise((res) => setTimeout(res, 50));
    const call = last();
    expect(call.outcome).toEqual({ completed: true, status: 200, clientLeft: true });
    expect(Buffer.concat(call.chunks).toString()).toContain('"completion_tokens":9');
  });

  it('a client that leaves a download: the upstream request is aborted at once', async () => {
    fake.respond((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.write('x'); // then waits
    });
    const upstreamRequest = fake.nextRequest();
    const { req, id } = await leaving('GET');
    const seen = await upstreamRequest;
    const leftAt = Date.now();
    req.on('error', () => {});
    req.destroy();
    while (!seen.aborted && Date.now() - leftAt < 900) await new Promise((r) => setTimeout(r, 10));
    // well before the idle timeout (1 s) could have ended it
    expect(seen.aborted).toBe(true);
    expect(Date.now() - leftAt).toBeLessThan(900);
    expect((await metering.ended(id)).outcome).toEqual({ completed: false, status: 200 });
  });
});

describe('metering that throws', () => {
  it('never breaks a call', async () => {
    const up = await startFakeUpstream();
    const boom = () => {
      throw new Error('metering bug');
    };
    const throwing: Metering = {
      begin: () => ({ requestBody: boom, responseHead: boom, responseChunk: boom, end: boom }),
    };
    const failingBegin: Metering = { begin: boom };
    for (const m of [throwing, failingBegin]) {
      const p = await startProxyDaemon({ upstreams: { openai: `${up.origin}/v1` }, metering: m });
      const res = await fetch(`${p.url}/proxy/openai/models`, { headers: { authorization: `Bearer ${p.key}` } });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ ok: true });
    }
  });
});
