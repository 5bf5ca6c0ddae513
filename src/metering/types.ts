import type { IncomingHttpHeaders } from 'node:http';
import type { Principal } from '../auth/types.js';
import type { ProviderSlug } from '../providers/types.js';
import type { UsageEvent } from './event.js';

/** Where finished usage events go: the durable spool and batch writer. Never blocks. */
export interface EventSink {
  push(event: UsageEvent): void;
}

/** What a response said of itself, for telemetry only (OpenTelemetry gen_ai.response.*). */
export interface ResponseInfo {
  id?: string;
  finishReasons?: string[];
}

/** Everything known about a call when it is admitted, before it is forwarded. */
export interface CallStart {
  /** The event id, also sent to the client as X-Meter-Request-Id (UUIDv7). */
  id: string;
  /** When the call arrived. */
  time: Date;
  /** performance.now() at arrival, for latency and time to first byte. */
  startedAt: number;
  principal: Principal;
  provider: ProviderSlug;
  /** Path after /proxy/{slug}/, without the query string. */
  path: string;
  /** The HTTP method: only a POST creates usage; a GET of a stored response (`v1/responses/{id}`)
   *  repeats the usage of the call that made it and must not be charged again. */
  method?: string;
  tags: Record<string, string>;
  /** Ids of the shadow budgets that would have refused this call (set at admission). */
  wouldBlock?: string[];
  /** The caller's W3C trace context (OpenTelemetry export parents its span on it). */
  traceparent?: string;
  tracestate?: string;
}

/**
 * Observes one proxied call off to the side of the bytes the client gets and turns it into one
 * usage event. The proxy calls these in order; none of them may throw or block.
 */
export interface CallMeter {
  /** The request body as it was forwarded (bounded: undefined when too large or not JSON). */
  requestBody(body: Buffer | undefined): void;
  /** The provider's response status and headers (content-type decides JSON, SSE or NDJSON).
   *  `at`: performance.now() when the head arrived, when it is given later (default: now). */
  responseHead(status: number, headers: IncomingHttpHeaders, at?: number): void;
  /** A chunk of the response body, as it was passed to the client (the proxy passes it on
   *  first). `at`: performance.now() when it arrived, for the first chunk (default: now). */
  responseChunk(chunk: Buffer, at?: number): void;
  /** The call is over: `completed` false when the client left or the upstream failed midway.
   *  Builds the event and pushes it to the sink. */
  end(outcome: CallOutcome): void;
}

export interface Metering {
  begin(call: CallStart): CallMeter;
}

/** How a call ended. `clientLeft`: the client went away after the request was forwarded (its
 *  answer was still read); with no answer from the provider either, usage is estimated. */
export interface CallOutcome {
  completed: boolean;
  status?: number;
  clientLeft?: boolean;
}
