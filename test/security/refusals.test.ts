import { connect } from 'node:net';
import { beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import type { Daemon } from '../../src/server/daemon.js';
import { startFullDaemon } from '../helpers/fleet.js';
import { createTestDatabase } from '../helpers/stores.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstreams.js';
import { rawExchange } from './raw.js';

/**
 * Early refusals close the connection instead of reading the body to its end. A client declares
 * a body as large as the daemon allows and sends it as fast as it can; the daemon refuses the
 * call from the head alone (no key, bad path, bad tags, unknown provider or route, plan) and
 * must close after its answer: the bytes the client got to send stay within what the sockets'
 * buffers hold, not the declared size. Also: 101+ headers with Host last get the 431 JSON error.
 */

let daemon: Daemon;
let upstream: FakeUpstream;
let pro: string;
let free: string;
let host: string;
/** METER_MAX_BODY_BYTES's default: the largest body a call may declare. */
const DECLARED = 536_870_912;
/** Loopback socket buffers hold a few MB; a body read to its end would be all of DECLARED. */
const BOUND = 64 * 1024 * 1024;

beforeAll(async () => {
  upstream = await startFakeUpstream({ readBody: false });
  upstream.respond((_req, res) => {
    // The provider refuses from the head, as providers do a bad credential.
    res.writeHead(401, { 'content-type': 'application/json' });
    res.end('{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}');
  });
  daemon = await startFullDaemon(await createTestDatabase(), upstream);
  await createAccount(daemon.store, 'big', 'pro');
  await createAccount(daemon.store, 'small', 'free');
  pro = (await createKey(daemon.store, 'big', 'k')).key;
  free = (await createKey(daemon.store, 'small', 'k')).key;
  host = new URL(daemon.url).host;
}, 120_000);

/** Sends `head`, then body bytes as fast as the socket takes them, until the daemon closes the
 *  connection (or 20 s). Returns the status answered and how many body bytes were accepted. */
function flood(head: string): Promise<{ status: number; sent: number; closed: boolean }> {
  const { hostname, port } = new URL(daemon.url);
  const chunk = Buffer.alloc(1024 * 1024, 0x61);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    let received = '';
    let sent = 0;
    let closed = false;
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(received)?.[1] ?? 0), sent, closed });
    };
    const timer = setTimeout(finish, 20_000);
    socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
    socket.on('close', () => {
      closed = true;
      finish();
    });
    socket.on('error', () => {});
    const pump = () => {
      while (!socket.destroyed && sent < DECLARED) {
        sent += chunk.length;
        if (!socket.write(chunk)) return void socket.once('drain', pump);
      }
    };
    socket.write(head, pump);
  });
}

const post = (target: string, lines: string[], method = 'POST') =>
  `${method} ${target} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: ${DECLARED}\r\n${lines
    .map((l) => `${l}\r\n`)
    .join('')}\r\n`;

describe('an early refusal closes the connection without reading the body', () => {
  const cases: [string, number, () => string][] = [
    ['no service key', 401, () => post('/proxy/openai/v1/chat/completions', [])],
    [
      'an unknown key (looked up in the store)',
      401,
      () => post('/proxy/openai/v1/chat/completions', ['Authorization: Bearer mk_0123456789ab_' + 'x'.repeat(43)]),
    ],
    ['a bad path', 400, () => post('/proxy/openai/../admin', [`Authorization: Bearer ${pro}`])],
    [
      'bad tags',
      400,
      () => post('/proxy/openai/v1/chat/completions', [`Authorization: Bearer ${pro}`, 'X-Metering-Tags: =']),
    ],
    ['an unknown provider', 404, () => post('/proxy/nope/v1/x', [`Authorization: Bearer ${pro}`])],
    ['an unknown route', 404, () => post('/nowhere', [])],
    [
      'an analytics endpoint the plan lacks',
      403,
      () => post('/analytics/events', [`Authorization: Bearer ${free}`], 'GET'),
    ],
    [
      'the provider refusing from the head',
      401,
      () => post('/proxy/openai/v1/chat/completions', [`Authorization: Bearer ${pro}`]),
    ],
  ];
  it.each(cases)('%s: answered, closed, the body not read', { timeout: 60_000 }, async (_name, status, head) => {
    const r = await flood(head());
    expect(r.status).toBe(status);
    expect(r.closed).toBe(true);
    expect(r.sent).toBeLessThan(BOUND);
  });
});

describe('too many headers', () => {
  it('101 headers with Host last (the order Node’s own client uses): the 431 JSON error, not a bare 400', async () => {
    const pads = Array.from({ length: 101 }, (_, i) => `X-Pad-${i}: x\r\n`).join('');
    const r = await rawExchange(
      daemon.url,
      `GET /proxy/openai/v1/models HTTP/1.1\r\nAuthorization: Bearer ${pro}\r\n${pads}Connection: close\r\nHost: ${host}\r\n\r\n`,
    );
    expect(r.status).toBe(431);
    expect(JSON.parse(r.body).error.code).toBe('headers_too_large');
  });

  it('2,500 one-letter headers with Host last (past Node’s own count limit): 431 JSON too', async () => {
    const pads = Array.from({ length: 2500 }, (_, i) => `${String.fromCharCode(97 + (i % 26))}:\r\n`).join('');
    const r = await rawExchange(
      daemon.url,
      `GET /healthz HTTP/1.1\r\n${pads}Connection: close\r\nHost: ${host}\r\n\r\n`,
    );
    expect(r.status).toBe(431);
    expect(JSON.parse(r.body).error.code).toBe('headers_too_large');
  });
});
