import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Readable } from 'node:stream';
import { serviceKeyFromHeaders } from '../auth/key-format.js';
import type { Principal } from '../auth/types.js';
import type { PricedCall } from '../budget/worst-case.js';
import type { Logger } from '../log.js';
import { uuidv7 } from '../metering/ids.js';
import type { CallStart, Metering } from '../metering/types.js';
import { sendError, type ErrorCode } from '../http.js';
import { hasBody, isSmallBody, readAhead, readSmallBody, RequestBodyTap } from './body-tap.js';
import { ForwardCall, type ForwardedCall } from './forward.js';
import { GuardedMeter } from './guarded-meter.js';
import { upstreamRequestHeaders } from './headers.js';
import type { ProxyMetrics } from './proxy-metrics.js';
import { unsafePath, upstreamPath, type UpstreamTarget } from './targets.js';
import type { Limits } from '../config.js';
import type { UpstreamPools } from './upstreams.js';

const PREFIX_LENGTH = '/proxy/'.length;

/** Resolves a service key token; synchronous for keys in memory (see KeyCache). */
export interface TokenAuthenticator {
  authenticateToken(token: string): Principal | undefined | Promise<Principal | undefined>;
}

export type TagParser = (
  headers: IncomingHttpHeaders,
) => { ok: true; tags: Record<string, string> } | { ok: false; message: string };

/** A refusal of the service itself (429, 402): status, code and message of its error body. */
export interface Refusal {
  status: number;
  code: ErrorCode;
  message: string;
}

/** In-memory pre-flight checks (plan rate limit, quota, hard cap): no I/O. Its headers go on
 *  every response of the call (CONTRACT §6 RateLimit-*), a refusal is answered at once. */
export type Admission =
  /** `wouldBlock`: shadow budgets that would have refused the call (flagged on its event). */
  | { ok: true; headers: Record<string, string>; wouldBlock?: string[] }
  | ({ ok: false; headers: Record<string, string> } & Refusal);

export interface Admitter {
  /** Admits the call or refuses it; a refused call counts against no limit. Synchronous in the
   *  steady state; a promise when a limit must ask the database (docs/fleet.md). `priced`: the
   *  request's body as read ahead, when needsBody asked for it. */
  admit(
    principal: Principal,
    call: { id: string; time: Date; priced?: PricedCall; tags?: Record<string, string> },
  ): Admission | Promise<Admission>;
  /** true when admission needs the request body first (a hard cap, a tokens-a-minute limit). */
  needsBody?(principal: Principal): boolean;
  /** Frees what an admitted call took when no usage event will settle it. */
  release?(callId: string): void;
  /** The RateLimit-* headers as they stand, counting nothing: for answers that forward nothing. */
  headers?(principal: Principal): Record<string, string>;
}

export interface ProxyDeps {
  targets: Map<string, UpstreamTarget>;
  pools: UpstreamPools;
  auth: TokenAuthenticator;
  metering: Metering;
  parseTags: TagParser;
  admitter?: Admitter;
  idleTimeoutMs: number;
  /** METER_MAX_BODY_BYTES (413 beyond) and METER_METERING_BODY_BYTES (the copy metering keeps). */
  limits: Pick<Limits, 'maxBodyBytes' | 'meteringBodyBytes'>;
  logger: Pick<Logger, 'error'>;
  /** Timings and refusals for /metrics (plain counters). */
  metrics?: ProxyMetrics;
}

/** A call that came in, before it is routed (its key is checked next). */
interface Arrival {
  req: IncomingMessage;
  res: ServerResponse;
  /** req.url, where `/proxy/{slug}` ends in it, and the slug. */
  url: string;
  slugEnd: number;
  slug: string;
  /** The service key came in X-Meter-Key: Authorization is the provider's own, forwarded. */
  viaMeterKey: boolean;
  /** performance.now() when the call arrived. */
  arrivedAt: number;
}

/** A call admitted and about to be forwarded. */
interface AdmittedCall extends ForwardedCall {
  req: IncomingMessage;
  /** What followed /proxy/{slug}/, query included. */
  rest: string;
  viaMeterKey: boolean;
  /** Frees what admission took when the call's meter can make no usage event. */
  release: (() => void) | undefined;
  /** The error bodies' shape (the provider's own). */
  shape: 'anthropic' | 'default';
}

/** No admitter (tests, tools): every call passes, with no headers of its own. */
const ADMIT_ALL: Admission = { ok: true, headers: {} };

/** Runs `then` on an admission, at once when it is already decided. */
const whenAdmitted = (a: Admission | Promise<Admission>, then: (a: Admission) => void): void | Promise<void> =>
  a instanceof Promise ? a.then(then) : then(a);

/** Where `/proxy/{slug}` ends in the URL: at the next `/` or `?`, or the end. */
function slugEnd(url: string): number {
  for (let i = PREFIX_LENGTH; i < url.length; i++) {
    const c = url.charCodeAt(i);
    if (c === 0x2f || c === 0x3f) return i;
  }
  return url.length;
}

/** Why a service key was refused. An SDK sends its provider key as `Authorization: Bearer sk-…`:
 *  without X-Meter-Key that is where the service key is looked for, so say where each key goes. */
function refusedKeyMessage(key: { token: string; viaMeterKey: boolean }): string {
  if (key.viaMeterKey || key.token.startsWith('mk_'))
    return 'invalid service key: unknown, revoked, expired or malformed';
  return (
    'no service key: Authorization carries something that is not a service key (mk_…) and no X-Meter-Key was sent. ' +
    'Send the service key as X-Meter-Key: mk_…; the provider key stays where the SDK puts it (Authorization, ' +
    'forwarded unchanged), or goes in X-Provider-Authorization when Authorization carries the service key'
  );
}

/** `{METHOD} /proxy/{slug}/{path}?{query}` (CONTRACT §2): authenticate (before routing),
 *  route, read tags, then forward while the metering watches. */
export function createProxyHandler(deps: ProxyDeps) {
  /** The daemon answers the call itself (nothing forwarded): counted by reason. */
  const refuseCall = (
    res: ServerResponse,
    status: number,
    code: ErrorCode,
    message: string,
    opts?: Parameters<typeof sendError>[4],
  ) => {
    deps.metrics?.refused(code);
    sendError(res, status, code, message, opts);
  };
  const unauthorized = (res: ServerResponse, slug: string, message: string) =>
    refuseCall(res, 401, 'invalid_api_key', message, {
      shape: deps.targets.get(slug)?.anthropicErrors ? 'anthropic' : 'default',
    });

  function forward(arrival: Arrival, principal: Principal): void | Promise<void> {
    const { req, res, url, slug } = arrival;
    const time = new Date();
    const target = deps.targets.get(slug);
    if (!target) {
      return refuseCall(
        res,
        404,
        'unknown_provider',
        `unknown provider ${JSON.stringify(slug.slice(0, 64))}: expected one of ${[...deps.targets.keys()].join(', ')}`,
        { headers: deps.admitter?.headers?.(principal) },
      );
    }
    const shape = target.anthropicErrors ? 'anthropic' : 'default';
    // `rest` is what followed /proxy/{slug}/, query included.
    const end = arrival.slugEnd;
    const rest = url.charCodeAt(end) === 0x2f ? url.slice(end + 1) : url.slice(end);
    const q = rest.indexOf('?');
    const path = q === -1 ? rest : rest.slice(0, q);
    const badPath = unsafePath(path);
    if (badPath)
      return refuseCall(res, 400, 'invalid_path', badPath, { shape, headers: deps.admitter?.headers?.(principal) });
    const length = req.headers['content-length'];
    if (length !== undefined && Number(length) > deps.limits.maxBodyBytes) {
      res.shouldKeepAlive = false; // the body is not read
      return refuseCall(
        res,
        413,
        'request_too_large',
        `request body over ${deps.limits.maxBodyBytes} bytes (METER_MAX_BODY_BYTES)`,
        { shape, headers: deps.admitter?.headers?.(principal) },
      );
    }
    const tags = deps.parseTags(req.headers);
    if (!tags.ok)
      return refuseCall(res, 400, 'invalid_tags', tags.message, {
        shape,
        headers: deps.admitter?.headers?.(principal),
      });

    const id = uuidv7(time.getTime());
    // The caller's trace context rides along for OpenTelemetry (Node joins a repeated header: a string).
    const { traceparent, tracestate } = req.headers as Record<string, string | undefined>;
    const start: CallStart = {
      id,
      time,
      startedAt: arrival.arrivedAt,
      principal,
      provider: target.slug,
      path,
      method: req.method,
      tags: tags.tags,
      traceparent,
      tracestate,
    };
    const call: AdmittedCall = {
      req,
      res,
      start,
      target,
      rest,
      shape,
      viaMeterKey: arrival.viaMeterKey,
      headers: undefined,
      release: undefined,
    };
    const admitter = deps.admitter;
    if (!admitter?.needsBody?.(principal)) {
      // Decided at once in the steady state: then no closure is made for the answer.
      const a = admitter ? admitter.admit(principal, { id, time }) : ADMIT_ALL;
      return a instanceof Promise ? a.then((x) => go(call, x)) : go(call, a);
    }
    // A hard cap or a tokens-a-minute limit: the call's worst case comes from its body, so read
    // it before deciding.
    return readAhead(req, deps.limits.meteringBodyBytes).then(({ body, bytes, head, source }) => {
      const priced = { provider: target.slug, path, body, bodyBytes: bytes, head, time };
      return whenAdmitted(admitter.admit(principal, { id, time, priced, tags: tags.tags }), (a) => {
        if (admitted(call, a)) dispatch(call, bytes > 0 ? source : undefined);
      });
    });
  }

  /** Refuses the call, or makes it ready to forward. */
  function admitted(call: AdmittedCall, a: Admission): boolean {
    if (!a.ok) {
      refuseCall(call.res, a.status, a.code, a.message, { shape: call.shape, headers: a.headers });
      return false;
    }
    call.headers = a.headers;
    // Shadow budgets this call would have met refused: flagged on its event.
    if (a.wouldBlock) call.start.wouldBlock = a.wouldBlock;
    // Bound, not a closure: a closure here would keep this whole function's scope (request,
    // response, body) alive as long as the call's meter holds it, past many scavenges.
    const admitter = deps.admitter;
    if (admitter?.release) call.release = admitter.release.bind(admitter, call.start.id);
    return true;
  }

  /** An admission that needed no body: the body, when small, is read whole, then forwarded. */
  function go(call: AdmittedCall, a: Admission): void {
    if (!admitted(call, a)) return;
    const req = call.req;
    if (!hasBody(req) || !isSmallBody(req)) return dispatch(call, hasBody(req) ? req : undefined);
    readSmallBody(req, (body) => {
      if (body) return dispatch(call, body);
      // The client left mid-body: nothing goes upstream, the call is still metered (as a
      // call the client left, the same event a forwarded one would have made).
      GuardedMeter.begin(deps.metering, call.start, deps.logger, call.release).end({ completed: false });
      call.res.destroy();
    });
  }

  function dispatch(call: AdmittedCall, body: IncomingMessage | AsyncIterable<Buffer> | Buffer | undefined): void {
    const { req, target } = call;
    const meter = GuardedMeter.begin(deps.metering, call.start, deps.logger, call.release);
    const whole = Buffer.isBuffer(body) ? body : undefined;
    const tap = whole
      ? RequestBodyTap.whole(whole)
      : body
        ? new RequestBodyTap(deps.limits.meteringBodyBytes, deps.limits.maxBodyBytes)
        : undefined;
    const forwarded = new ForwardCall(call, meter, tap, deps.metrics?.of(target.slug));
    try {
      deps.pools.get(target.origin).dispatch(
        {
          origin: target.origin,
          path: upstreamPath(target, call.rest),
          method: req.method!,
          headers: upstreamRequestHeaders(req, call.viaMeterKey),
          // undici streams an async iterable body (its types only list Readable)
          body:
            whole ?? ((tap ? tap.stream(body as IncomingMessage | AsyncIterable<Buffer>) : null) as Readable | null),
          headersTimeout: deps.idleTimeoutMs,
          bodyTimeout: deps.idleTimeoutMs,
        },
        forwarded,
      );
    } catch (err) {
      // undici refuses some requests up front (a header value it rejects): nothing was sent.
      forwarded.onResponseError(undefined as never, err as Error);
    }
  }

  return function handleProxy(req: IncomingMessage, res: ServerResponse): void | Promise<void> {
    const arrivedAt = performance.now();
    const url = req.url!;
    const end = slugEnd(url);
    const slug = url.slice(PREFIX_LENGTH, end);
    const key = serviceKeyFromHeaders(req.headers);
    if (!key)
      return unauthorized(res, slug, 'missing service key: send Authorization: Bearer mk_… or X-Meter-Key: mk_…');
    const found = deps.auth.authenticateToken(key.token);
    if (found === undefined) return unauthorized(res, slug, refusedKeyMessage(key));
    const arrival: Arrival = { req, res, url, slugEnd: end, slug, viaMeterKey: key.viaMeterKey, arrivedAt };
    if (!(found instanceof Promise)) return forward(arrival, found);
    return found.then((principal) =>
      principal ? forward(arrival, principal) : unauthorized(res, slug, refusedKeyMessage(key)),
    );
  };
}
