import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { atFileEnd } from './cleanup.js';

/** What a fake provider saw of one request. */
export interface SeenRequest {
  method: string;
  /** Path and query as received. */
  url: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: Buffer;
  /** true once the connection closed before the response was finished (the proxy aborted). */
  aborted: boolean;
}

export type Responder = (req: IncomingMessage, res: ServerResponse, seen: SeenRequest) => void | Promise<void>;

export interface FakeUpstream {
  /** `http://127.0.0.1:PORT` */
  origin: string;
  requests: SeenRequest[];
  /** Answers the next requests this way (default: 200 `{"ok":true}`). */
  respond(responder: Responder): void;
  /** Resolves with the next request as soon as its head has arrived (body not read). */
  nextRequest(): Promise<SeenRequest>;
  close(): Promise<void>;
}

/** A provider stand-in on 127.0.0.1, port 0. `readBody: false` hands the responder the
 *  request before its body is read (streaming tests read it themselves). */
export async function startFakeUpstream(opts: { readBody?: boolean } = {}): Promise<FakeUpstream> {
  let responder: Responder = (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"ok":true}');
  };
  const requests: SeenRequest[] = [];
  const waiters: ((r: SeenRequest) => void)[] = [];
  const server: Server = createServer(async (req, res) => {
    const seen: SeenRequest = {
      method: req.method!,
      url: req.url!,
      headers: req.headers,
      rawHeaders: req.rawHeaders,
      body: Buffer.alloc(0),
      aborted: false,
    };
    res.on('close', () => {
      if (!res.writableFinished) seen.aborted = true;
    });
    requests.push(seen);
    waiters.shift()?.(seen);
    if (opts.readBody !== false) {
      const chunks: Buffer[] = [];
      try {
        for await (const c of req) chunks.push(c as Buffer);
      } catch {
        // The proxy cut the request mid-body (as it must past METER_MAX_BODY_BYTES): keep what
        // arrived; a rejection here would be unhandled and fail the whole run.
        seen.aborted = true;
        seen.body = Buffer.concat(chunks);
        res.destroy();
        return;
      }
      seen.body = Buffer.concat(chunks);
    }
    try {
      await responder(req, res, seen);
    } catch {
      res.destroy();
    }
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  let closed = false;
  const fake: FakeUpstream = {
    origin: `http://127.0.0.1:${port}`,
    requests,
    respond(r) {
      responder = r;
    },
    nextRequest: () => new Promise((resolve) => waiters.push(resolve)),
    async close() {
      if (closed) return;
      closed = true;
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  atFileEnd(() => fake.close());
  return fake;
}

/** Writes a response in pieces: the pieces of an SSE/NDJSON body, as a provider streams them. */
export async function writeInPieces(
  res: ServerResponse,
  status: number,
  contentType: string,
  pieces: string[],
  gapMs = 0,
): Promise<void> {
  res.writeHead(status, { 'content-type': contentType, 'cache-control': 'no-cache' });
  for (const piece of pieces) {
    if (res.destroyed) return;
    res.write(piece);
    if (gapMs > 0) await new Promise((r) => setTimeout(r, gapMs));
  }
  res.end();
}

/** An SSE body split after each event (blank line), CRLF or LF. */
export function sseEvents(body: string): string[] {
  return body.split(/(?<=\r?\n\r?\n)/).filter((p) => p.length > 0);
}

/**
 * A listener on 127.0.0.1 that never accepts: a child process whose event loop is blocked,
 * with its accept queue filled, so a new connection attempt hangs in SYN (a connect timeout).
 */
export async function startUnansweredListener(): Promise<{ origin: string; close(): void }> {
  const { spawn } = await import('node:child_process');
  const { connect } = await import('node:net');
  const script =
    `const s=require('net').createServer();s.listen({port:0,host:'127.0.0.1',backlog:1},()=>{` +
    `process.stdout.write(s.address().port+'\\n');Atomics.wait(new Int32Array(new SharedArrayBuffer(4)),0,0,120000);process.exit(0);});`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = Number(
    await new Promise<string>((resolve) => child.stdout!.once('data', (d: Buffer) => resolve(d.toString().trim()))),
  );
  const fillers: import('node:net').Socket[] = [];
  // Fill the accept queue until a connection no longer completes at once.
  for (let i = 0; i < 8; i++) {
    const s = connect(port, '127.0.0.1');
    s.on('error', () => {});
    fillers.push(s);
    const connected = await Promise.race([
      new Promise<boolean>((r) => s.once('connect', () => r(true))),
      new Promise<boolean>((r) => setTimeout(() => r(false), 200)),
    ]);
    if (!connected) break;
  }
  const close = () => {
    for (const s of fillers) s.destroy();
    child.kill('SIGKILL');
  };
  // Blocked, it cannot notice its parent leaving: it ends itself after 2 minutes at the latest.
  child.unref();
  return { origin: `http://127.0.0.1:${port}`, close };
}
