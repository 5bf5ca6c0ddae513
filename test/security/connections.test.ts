import { connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { answerChat } from '../helpers/fleet.js';
import { startProxyDaemon } from '../helpers/proxy.js';
import { startFakeUpstream } from '../helpers/upstreams.js';
import { rawExchange } from './raw.js';

/**
 * Connection floods against the real daemon: 2,000 concurrent connections, half of them
 * slow-loris clients that never finish their request head, while another client keeps being
 * served; slow heads get 408 at METER_HEADERS_TIMEOUT_MS; past METER_MAX_CONNECTIONS a
 * request gets 503 with Retry-After until connections free up.
 */

interface Held {
  socket: Socket;
  received: string;
  closed: boolean;
}

async function open(url: string, n: number, firstBytes?: string): Promise<Held[]> {
  const { hostname, port } = new URL(url);
  const held: Held[] = [];
  for (let i = 0; i < n; i += 200) {
    await Promise.all(
      Array.from(
        { length: Math.min(200, n - i) },
        () =>
          new Promise<void>((resolve, reject) => {
            const h: Held = { socket: connect(Number(port), hostname), received: '', closed: false };
            h.socket.on('data', (d: Buffer) => (h.received += d.toString('latin1')));
            h.socket.on('close', () => (h.closed = true));
            h.socket.on('error', () => {});
            h.socket.once('connect', () => {
              if (firstBytes) h.socket.write(firstBytes);
              held.push(h);
              resolve();
            });
            h.socket.once('error', reject);
          }),
      ),
    );
  }
  return held;
}

const waitFor = async (check: () => boolean, ms: number) => {
  const t0 = Date.now();
  while (!check() && Date.now() - t0 < ms) await new Promise((r) => setTimeout(r, 50));
  return check();
};

describe('connection floods', () => {
  it(
    '2,000 connections, 1,000 of them slow heads: another client is served throughout; slow heads get 408',
    { timeout: 90_000 },
    async () => {
      const upstream = await startFakeUpstream();
      answerChat(upstream, { prompt: 10, completion: 5 });
      const { url, key } = await startProxyDaemon({
        upstreams: { openai: `${upstream.origin}/v1` },
        env: { METER_HEADERS_TIMEOUT_MS: '3000', METER_MAX_CONNECTIONS: '5000' },
      });
      const slow = await open(url, 1_000, 'POST /proxy/openai/v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ');
      const idle = await open(url, 1_000);
      const trickle = setInterval(() => {
        for (const h of slow) if (!h.closed) h.socket.write('a');
      }, 500);
      try {
        // 2,000 connections are open: a well-behaved client is still served, call after call.
        for (let i = 0; i < 10; i++) {
          const res = await fetch(`${url}/proxy/openai/v1/chat/completions`, {
            method: 'POST',
            headers: { authorization: `Bearer ${key}` },
            body: '{"model":"gpt-4o","messages":[]}',
          });
          expect(res.status).toBe(200);
          await res.arrayBuffer();
        }
        // Trickling a byte every 500 ms does not keep a head alive past the limit.
        expect(await waitFor(() => slow.every((h) => h.closed), 20_000)).toBe(true);
        const answered = slow.filter((h) => h.received.startsWith('HTTP/1.1 408'));
        expect(answered.length).toBeGreaterThan(900); // a socket may close before its answer is read
        expect(answered[0]!.received).toContain('"code":"request_timeout"');
        // Connections that never sent a byte are closed too.
        expect(await waitFor(() => idle.every((h) => h.closed), 20_000)).toBe(true);
        expect(upstream.requests).toHaveLength(10);
      } finally {
        clearInterval(trickle);
        for (const h of [...slow, ...idle]) h.socket.destroy();
      }
    },
  );

  it(
    'past METER_MAX_CONNECTIONS a request gets 503 overloaded with Retry-After; served again once connections close',
    { timeout: 60_000 },
    async () => {
      const upstream = await startFakeUpstream();
      const { url, key } = await startProxyDaemon({
        upstreams: { openai: `${upstream.origin}/v1` },
        env: { METER_MAX_CONNECTIONS: '50' },
      });
      const held = await open(url, 50);
      const request = `GET /proxy/openai/v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer ${key}\r\n\r\n`;
      try {
        const refused = await rawExchange(url, request);
        expect(refused.status).toBe(503);
        expect(refused.head.toLowerCase()).toContain('retry-after: 1');
        expect(refused.body).toContain('"code":"overloaded"');
        expect(upstream.requests).toHaveLength(0);
      } finally {
        for (const h of held) h.socket.destroy();
      }
      expect(await waitFor(() => held.every((h) => h.closed), 5_000)).toBe(true);
      await new Promise((r) => setTimeout(r, 200)); // the server sees the closes
      expect((await rawExchange(url, request)).status).toBe(200);
    },
  );
});
