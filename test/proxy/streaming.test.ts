import { request } from 'node:http';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { beforeAll, describe, expect, it } from 'vitest';
import { REQUEST_COPY_LIMIT } from '../../src/proxy/body-tap.js';
import { RecordingMetering } from '../helpers/metering.js';
import { startProxyDaemon, type ProxyDaemon } from '../helpers/proxy.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstreams.js';

let fake: FakeUpstream;
let proxy: ProxyDaemon;
const metering = new RecordingMetering();

beforeAll(async () => {
  fake = await startFakeUpstream({ readBody: false });
  proxy = await startProxyDaemon({ upstreams: { openai: `${fake.origin}/v1` }, metering });
});

/** Something the test awaits, resolved from elsewhere (a gate between two sides). */
function signal(): { promise: Promise<void>; fire: () => void } {
  let fire!: () => void;
  const promise = new Promise<void>((r) => (fire = r));
  return { promise, fire };
}

function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([
    p,
    new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)),
  ]);
}

const url = () => `${proxy.url}/proxy/openai/chat/completions`;
const auth = () => ({ authorization: `Bearer ${proxy.key}` });

describe('streaming', () => {
  it('an SSE event reaches the client before the provider sends the next one', async () => {
    const clientHasFirst = signal();
    fake.respond(async (req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"n":1}\n\n');
      // The provider holds its last event until the client proved it has the first.
      await within(clientHasFirst.promise, 5_000, 'first event at the client');
      res.end('data: {"n":2}\n\ndata: [DONE]\n\n');
    });
    const res = await fetch(url(), { method: 'POST', headers: auth(), body: '{"stream":true}' });
    const reader = res.body!.getReader();
    let received = '';
    while (!received.includes('"n":1')) received += Buffer.from((await reader.read()).value!).toString();
    expect(received).toBe('data: {"n":1}\n\n');
    clientHasFirst.fire();
    for (let r = await reader.read(); !r.done; r = await reader.read()) received += Buffer.from(r.value).toString();
    expect(received).toBe('data: {"n":1}\n\ndata: {"n":2}\n\ndata: [DONE]\n\n');
  });

  it('100 MB stream through with flat memory', async () => {
    const total = 100 * 1024 * 1024;
    const piece = Buffer.alloc(256 * 1024, 'x');
    fake.respond(async (req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': total });
      for (let sent = 0; sent < total; sent += piece.length) {
        if (!res.write(piece)) await new Promise((r) => res.once('drain', r));
      }
      res.end();
    });
    // Live memory (after a collection) is what buffering would show; RSS also counts garbage
    // the allocator keeps, so for RSS "flat" means: no higher late in the transfer than early.
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const live = () => {
      const m = process.memoryUsage();
      return m.heapUsed + m.external;
    };
    gc();
    const liveBefore = live();
    let peakLive = liveBefore;
    let received = 0;
    const rssEarly: number[] = [];
    const rssLate: number[] = [];
    const sampler = setInterval(() => {
      (received < total / 2 ? rssEarly : rssLate).push(process.memoryUsage().rss);
      gc();
      peakLive = Math.max(peakLive, live());
    }, 50);
    await new Promise<void>((resolve, reject) => {
      const req = request(url(), { method: 'GET', headers: auth(), agent: false }, (res) => {
        res.on('data', (c: Buffer) => (received += c.length));
        res.on('end', resolve);
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    });
    clearInterval(sampler);
    expect(received).toBe(total);
    // Proxy, provider and client share this process: buffering anywhere would show here
    // (the recording metering keeps its first 8 MiB of chunks).
    expect(peakLive - liveBefore).toBeLessThan(48 * 1024 * 1024);
    if (rssEarly.length > 0 && rssLate.length > 0) {
      expect(Math.max(...rssLate)).toBeLessThan(Math.max(...rssEarly) + 32 * 1024 * 1024);
    }
    expect(metering.calls.at(-1)!.chunkBytes).toBe(total);
  }, 60_000);

  it('a slow client slows the provider down (backpressure): the proxy does not read ahead', async () => {
    let written = 0;
    const piece = Buffer.alloc(64 * 1024, 'y');
    const total = 64 * 1024 * 1024;
    fake.respond(async (req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      while (written < total && !res.destroyed) {
        written += piece.length;
        if (!res.write(piece)) await new Promise((r) => res.once('drain', r));
      }
      res.end();
    });
    await new Promise<void>((resolve, reject) => {
      const req = request(url(), { headers: auth(), agent: false }, (res) => {
        res.pause(); // the client reads nothing for a while
        setTimeout(() => {
          try {
            // socket buffers and stream high-water marks only: a few MB at most
            expect(written).toBeLessThan(16 * 1024 * 1024);
            res.destroy();
            resolve();
          } catch (err) {
            reject(err);
          }
        }, 700);
      });
      req.on('error', () => {});
      req.end();
    });
  });
});

describe('request body', () => {
  it('is forwarded as a stream: the provider has the first bytes before the client sent the last', async () => {
    const providerHasFirst = signal();
    let seenBody = '';
    fake.respond(async (req, res) => {
      for await (const c of req) {
        seenBody += (c as Buffer).toString();
        if (seenBody.includes('first')) providerHasFirst.fire();
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
    const done = new Promise<number>((resolve, reject) => {
      const req = request(
        url(),
        { method: 'POST', headers: { ...auth(), 'content-type': 'application/json' }, agent: false },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode!));
        },
      );
      req.on('error', reject);
      req.write('{"model":"gpt-first",');
      void within(providerHasFirst.promise, 5_000, 'first body bytes at the provider').then(
        () => req.end('"x":"last"}'),
        (err: Error) => {
          reject(err);
          req.destroy();
        },
      );
    });
    expect(await done).toBe(200);
    expect(seenBody).toBe('{"model":"gpt-first","x":"last"}');
    const call = metering.calls.at(-1)!;
    expect(call.requestBody?.toString()).toBe(seenBody);
  });

  it('the metering gets a copy up to 4 MiB; a larger body is forwarded whole, and the copy is undefined', async () => {
    let seen = 0;
    fake.respond(async (req, res) => {
      for await (const c of req) seen += (c as Buffer).length;
      res.end('{}');
    });
    const big = Buffer.alloc(REQUEST_COPY_LIMIT + 1, 'z');
    const res = await fetch(url(), { method: 'POST', headers: auth(), body: big });
    expect(res.status).toBe(200);
    expect(seen).toBe(big.length);
    const call = metering.calls.at(-1)!;
    expect(call.steps).toContain('requestBody');
    expect(call.requestBody).toBeUndefined();

    const small = '{"model":"m"}';
    await fetch(url(), { method: 'POST', headers: auth(), body: small });
    expect(metering.calls.at(-1)!.requestBody?.toString()).toBe(small);
  });
});
