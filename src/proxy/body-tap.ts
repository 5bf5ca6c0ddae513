import { MeterError } from '../errors.js';
import type { IncomingMessage } from 'node:http';

/** The metering reads the requested model from the body: a copy is kept up to this size. */
export const REQUEST_COPY_LIMIT = 4 * 1024 * 1024;

/** A request body over METER_MAX_BODY_BYTES: the upstream request is aborted, the client gets 413. */
export class BodyTooLargeError extends MeterError {
  override name = 'BodyTooLargeError';
  override readonly code = 'request_too_large';
  override readonly status = 413;
  constructor(readonly maxBytes: number) {
    super(`request body over ${maxBytes} bytes (METER_MAX_BODY_BYTES)`);
  }
}

/**
 * Forwards a request body as a stream while keeping a bounded copy on the side. The copy is
 * handed out only when the whole body passed and fit within the limit.
 */
export class RequestBodyTap {
  private chunks: Buffer[] | undefined = [];
  private size = 0;
  private total = 0;
  private complete = false;

  constructor(
    private readonly limit = REQUEST_COPY_LIMIT,
    private readonly maxBytes = Infinity,
  ) {}

  /** The tap of a body that was read whole before it was forwarded. */
  static whole(body: Buffer): RequestBodyTap {
    const tap = new RequestBodyTap();
    tap.chunks = [body];
    tap.size = body.length;
    tap.complete = true;
    return tap;
  }

  /** The body for the upstream client. Stopping early (the provider answered before reading
   *  it all) must not destroy the request: its socket still carries our response. */
  async *stream(source: IncomingMessage | AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
    const chunks =
      'iterator' in source ? (source.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) : source;
    for await (const chunk of chunks) {
      this.total += chunk.length;
      if (this.total > this.maxBytes) throw new BodyTooLargeError(this.maxBytes);
      if (this.chunks) {
        this.size += chunk.length;
        if (this.size <= this.limit) this.chunks.push(chunk);
        else this.chunks = undefined;
      }
      yield chunk;
    }
    this.complete = true;
  }

  /** The whole body, or undefined when it was larger than the limit or has not all passed. */
  copy(): Buffer | undefined {
    const chunks = this.chunks;
    this.chunks = undefined;
    if (!this.complete || !chunks) return undefined;
    return chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, this.size);
  }
}

/** Bodies up to this size (a declared Content-Length) are read whole, then forwarded. */
export const SMALL_BODY = 64 * 1024;

/** A declared Content-Length of at most SMALL_BODY. */
export function isSmallBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return length !== undefined && req.headers['transfer-encoding'] === undefined && Number(length) <= SMALL_BODY;
}

/**
 * Reads a small body whole before it is forwarded: undici then writes the request's head and
 * body at once, without an async iteration per call (most calls' bodies are a few kB and are
 * in the same packet as their head). `done` gets the body, or undefined when the client went
 * away before sending all of it.
 */
export function readSmallBody(req: IncomingMessage, done: (body: Buffer | undefined) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  const onData = (chunk: Buffer) => {
    chunks.push(chunk);
    size += chunk.length;
  };
  const finish = (complete: boolean) => {
    req.off('data', onData).off('end', onEnd).off('close', onGone).off('error', onGone);
    done(complete ? (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)) : undefined);
  };
  const onEnd = () => finish(true);
  const onGone = () => finish(false);
  // Plain listeners (finish removes all four): once() would wrap each, on every call.
  req.on('data', onData).on('end', onEnd).on('close', onGone).on('error', onGone);
}

/** True when the request has a body to forward (a GET without one gets none upstream). */
export function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  if (length !== undefined) return length !== '0';
  return req.headers['transfer-encoding'] !== undefined;
}

/** Reads up to `limit` bytes of a request body before anything is forwarded (the hard cap
 *  prices a call from its body). `body` is the whole body when it fit; `source` replays what
 *  was read, then the rest, for the upstream. */
export async function readAhead(
  req: IncomingMessage,
  limit = REQUEST_COPY_LIMIT,
): Promise<{
  body: Buffer | undefined;
  bytes: number;
  /** What was read of a body too large to read whole; undefined when `body` is set. */
  head: Buffer | undefined;
  source: AsyncIterable<Buffer>;
}> {
  const it = (req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
  const head: Buffer[] = [];
  let bytes = 0;
  let done = false;
  while (bytes <= limit) {
    const next = await it.next();
    if (next.done) {
      done = true;
      break;
    }
    head.push(next.value);
    bytes += next.value.length;
  }
  const declared = Number(req.headers['content-length']);
  async function* source(): AsyncGenerator<Buffer> {
    yield* head;
    if (done) return;
    for (let next = await it.next(); !next.done; next = await it.next()) yield next.value;
  }
  return {
    body: done ? Buffer.concat(head, bytes) : undefined,
    head: done ? undefined : Buffer.concat(head, bytes),
    bytes: done ? bytes : Math.max(bytes, Number.isFinite(declared) ? declared : 0),
    source: source(),
  };
}
