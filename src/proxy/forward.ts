import { MeterFailure } from '../errors.js';
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Dispatcher } from 'undici';
import type { CallOutcome, CallStart } from '../metering/types.js';
import { closeIfBodyUnread, sendError } from '../http.js';
import { BodyTooLargeError, type RequestBodyTap } from './body-tap.js';
import type { GuardedMeter } from './guarded-meter.js';
import { clientResponseHeaders } from './headers.js';
import type { CallTimings } from './proxy-metrics.js';
import type { UpstreamTarget } from './targets.js';

const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

class ClientGoneError extends MeterFailure {
  override name = 'ClientGoneError';
  constructor() {
    super('the client closed the connection');
  }
}

/** An admitted call, as its response side needs it. */
export interface ForwardedCall {
  res: ServerResponse;
  /** The call's start record: its event id (X-Meter-Request-Id) and arrival time. */
  start: CallStart;
  target: UpstreamTarget;
  /** The service's own headers for this call (RateLimit-*), added to the provider's. */
  headers: Record<string, string> | undefined;
}

/** How long a stream is read on after its client left (boundStreamReadOn). */
const STREAM_READ_ON_MS = 3_000;

const isStream = (headers: IncomingHttpHeaders | undefined): boolean =>
  /event-stream|stream\+json|ndjson/i.test(String(headers?.['content-type'] ?? ''));

/**
 * One proxied call's response side, as an undici dispatch handler: bytes go to the client as
 * they arrive (backpressure pauses the upstream socket, nothing is buffered here), the meter
 * sees each chunk on the side, and a client that leaves does not make the call free (onClientClose).
 */
export class ForwardCall implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined;
  private status = 0;
  private headSent = false;
  private over = false;
  private clientGone = false;
  /** The client left after the request was forwarded: the answer is read and metered still. */
  private readOn = false;
  /** Cuts a stream its client left once STREAM_READ_ON_MS have passed (see onClientClose). */
  private readOnTimer: NodeJS.Timeout | undefined;
  private waitingForDrain = false;
  private bodyDelivered = false;
  /** The response head, until the meter is given it (with the first chunk it meters). */
  private head: { status: number; headers: IncomingHttpHeaders; at: number } | undefined;
  /** Chunks the client has and the meter has not seen yet, and when the first one arrived. The
   *  meter sees them on the next tick, after the client's bytes: Node corks a response's socket
   *  on each write until then, so metering at once would hold back the very bytes just written
   *  (a stream's first byte, the chunks that arrive together). */
  private readonly unmetered: Buffer[] = [];
  private firstAt: number | undefined;
  private meterQueued = false;
  /** The response head's headers, kept after the meter took the head (a stream's read-on bound). */
  private streamHeaders: IncomingHttpHeaders | undefined;
  /** performance.now() when undici started writing the request upstream (0: not yet). */
  private sentAt = 0;
  /** The daemon's time before the request went out, plus handling the response head (ms). */
  private overheadMs = 0;
  private firstChunk = true;
  /** When the request was handed to undici (a call that never went out is measured to here). */
  private readonly dispatchedAt = performance.now();

  private readonly res: ServerResponse;
  private readonly requestId: string;
  private readonly target: UpstreamTarget;
  private readonly extraHeaders: Record<string, string> | undefined;
  /** performance.now() when the call arrived. */
  private readonly arrivedAt: number;

  constructor(
    call: ForwardedCall,
    private readonly meter: GuardedMeter,
    private readonly tap: RequestBodyTap | undefined,
    private readonly timings: CallTimings | undefined,
  ) {
    this.res = call.res;
    this.requestId = call.start.id;
    this.target = call.target;
    this.extraHeaders = call.headers;
    this.arrivedAt = call.start.startedAt;
    call.res.on('close', this.onClientClose); // a response closes once: on() spares a once() wrapper per call
  }

  private readonly onClientClose = (): void => {
    if (this.over) return;
    this.clientGone = true;
    // A call the provider has whole (a POST) is billed whoever listens: its answer is read to its
    // end (within the upstream timeout) and metered (CONTRACT §6). Anything else is abandoned:
    // a request not sent whole, a download (batch results) the client will fetch again.
    const req = this.res.req;
    this.readOn = this.controller !== undefined && req?.complete === true && req.method === 'POST';
    if (!this.readOn) this.controller?.abort(new ClientGoneError());
    else {
      if (this.waitingForDrain) this.onDrain();
      if (this.head !== undefined || this.status !== 0) this.boundStreamReadOn();
    }
    // A client that only half-closed would otherwise keep this socket (and the drain) waiting.
    this.res.destroy();
  };

  /** A stream is generated only while someone reads it: the provider stops and bills what it
   *  made when its connection closes. So a stream its client left is read on briefly (its usage
   *  may be about to arrive), then closed and estimated from what arrived; reading an endless or
   *  long stream on would make the provider generate, and bill, what nobody asked to read. */
  private boundStreamReadOn(): void {
    if (this.readOnTimer || !isStream(this.head?.headers ?? this.streamHeaders)) return;
    this.readOnTimer = setTimeout(() => this.controller?.abort(new ClientGoneError()), STREAM_READ_ON_MS);
    this.readOnTimer.unref();
  }

  private readonly onDrain = (): void => {
    this.waitingForDrain = false;
    this.controller?.resume();
  };

  /** The metering reads the request (model) before the response; once, whatever comes first. */
  private deliverRequestBody(): void {
    if (this.bodyDelivered) return;
    this.bodyDelivered = true;
    this.meter.requestBody(this.tap?.copy());
  }

  /** Request body, then head, then the chunks: the order the meter expects. */
  private meterUnmetered(): void {
    this.meterHead();
    const chunks = this.unmetered;
    for (let i = 0; i < chunks.length; i++) {
      this.meter.responseChunk(chunks[i]!, this.firstAt);
      this.firstAt = undefined;
    }
    chunks.length = 0;
  }

  /** The next tick's metering (queued by onResponseData): after Node's uncork sent the bytes. */
  private readonly meterLater = (): void => {
    this.meterQueued = false;
    if (!this.over) this.meterUnmetered();
  };

  private meterHead(): void {
    this.deliverRequestBody();
    const head = this.head;
    if (!head) return;
    this.head = undefined;
    this.meter.responseHead(head.status, head.headers, head.at);
  }

  private finish(completed: boolean): void {
    if (this.over) return;
    this.over = true;
    if (this.readOnTimer) clearTimeout(this.readOnTimer);
    this.meterUnmetered();
    const outcome: CallOutcome = this.status === 0 ? { completed } : { completed, status: this.status };
    if (this.readOn) outcome.clientLeft = true;
    this.meter.end(outcome);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.sentAt = performance.now();
    this.controller = controller;
    if (this.clientGone) controller.abort(new ClientGoneError());
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
    statusMessage?: string,
  ): void {
    if (statusCode < 200 || (this.clientGone && !this.readOn)) return; // 1xx informational: not relayed
    const headAt = performance.now();
    this.status = statusCode;
    this.head = { status: statusCode, headers, at: headAt };
    this.streamHeaders = headers;
    if (this.clientGone) return this.boundStreamReadOn(); // metered all the same
    const out = clientResponseHeaders(headers, this.requestId);
    if (this.extraHeaders) Object.assign(out, this.extraHeaders);
    // What is known when the head goes out: the request side, and this head's own handling.
    this.overheadMs = (this.sentAt || headAt) - this.arrivedAt + (performance.now() - headAt);
    out['x-meter-overhead-ms'] = this.overheadMs.toFixed(3);
    if (this.timings) {
      this.timings.overhead.observe(this.overheadMs / 1000);
      if (this.sentAt) this.timings.upstream.observe((headAt - this.sentAt) / 1000);
    }
    try {
      closeIfBodyUnread(this.res); // the provider answered before the body was all sent (a refusal)
      if (statusMessage) this.res.writeHead(statusCode, statusMessage, out);
      else this.res.writeHead(statusCode, out);
      this.headSent = true;
    } catch (err) {
      controller.abort(err as Error);
    }
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.clientGone && !this.readOn) return;
    const chunkAt = this.firstChunk ? performance.now() : 0;
    if (!this.clientGone && !this.res.write(chunk) && !this.waitingForDrain) {
      this.waitingForDrain = true;
      controller.pause();
      this.res.once('drain', this.onDrain);
    }
    this.unmetered.push(chunk);
    if (this.firstChunk) {
      this.firstChunk = false;
      this.firstAt = chunkAt;
      this.timings?.firstByte.observe((this.overheadMs + performance.now() - chunkAt) / 1000);
    }
    if (!this.meterQueued) {
      this.meterQueued = true;
      process.nextTick(this.meterLater); // queued after the write's uncork: the bytes leave first
    }
  }

  onResponseEnd(): void {
    // The client has the whole answer before the metering builds its event.
    if (!this.clientGone) this.res.end();
    this.finish(true);
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    if (this.over) return;
    if (this.clientGone) return this.finish(false);
    if (this.headSent) {
      // Mid-response: the status is gone already; ending the connection tells the client.
      this.finish(false);
      this.res.destroy();
      return;
    }
    const shape = this.target.anthropicErrors ? 'anthropic' : 'default';
    // Before the request went out the time is the daemon's; connecting or waiting is not.
    const overheadMs = (this.sentAt || this.dispatchedAt) - this.arrivedAt;
    const headers = {
      ...this.extraHeaders,
      'x-meter-request-id': this.requestId,
      'x-meter-overhead-ms': overheadMs.toFixed(3),
    };
    if (err instanceof BodyTooLargeError) {
      this.status = 413;
      this.finish(false);
      this.res.shouldKeepAlive = false; // the rest of the body is not read
      return sendError(this.res, 413, 'request_too_large', err.message, { shape, headers });
    }
    const code = (err as { code?: string }).code;
    const timedOut = code !== undefined && TIMEOUT_CODES.has(code);
    this.status = timedOut ? 504 : 502;
    this.finish(false);
    // The message names the provider and the error's kind, never the URL (Gemini's ?key=).
    if (timedOut) {
      sendError(this.res, 504, 'upstream_timeout', `${this.target.slug} did not answer in time (${code})`, {
        shape,
        headers,
      });
    } else {
      const reason = code ?? err.name;
      sendError(this.res, 502, 'upstream_unreachable', `${this.target.slug} could not be reached (${reason})`, {
        shape,
        headers,
      });
    }
  }
}
