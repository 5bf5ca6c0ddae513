import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Component, Compose, DaemonContext, Handler } from '../component.js';
import type { Config } from '../config.js';
import { userError } from '../errors.js';
import type { Logger } from '../log.js';
import { PeriodicTask, settlesWithin } from '../periodic.js';
import { getProvider } from '../providers/index.js';
import { handleMetricsOnProxyPort, startMetricsServer, type MetricsServer } from '../metrics/endpoint.js';
import { DaemonMetrics } from '../metrics/registry.js';
import { describeStore, type Store } from '../store/index.js';
import { openStoreWhenUp, StartAborted } from '../store/wait.js';
import { startAdminServer } from '../admin/server.js';
import { sendError, sendJson } from '../http.js';
import { answerClientErrors, isOverLimit, markOverLimit, warnIfExposed } from './limits.js';

/** The longest a shutdown waits for in-flight calls (long streams) before cutting them. */
export const DRAIN_LIMIT_MS = 30_000;
/** The longest a shutdown waits for one component to stop (the event writer bounds its own
 *  final write at 10 s), and for the store to close: a database that hangs instead of failing
 *  must not hold the exit back past the orchestrator's grace period. */
export const STOP_LIMIT_MS = 12_000;
export const STORE_CLOSE_LIMIT_MS = 3_000;

/** A 404 of the daemon's own: an SDK pointed at the daemon without `/proxy/<slug>` lands here. */
function noRouteMessage(method: string, path: string): string {
  const first = path.split('/')[1] ?? '';
  const example = getProvider(first) ? `did you mean /proxy${path}?` : 'e.g. /proxy/openai/v1/chat/completions';
  return `no route for ${method} ${path}: proxied paths start with /proxy/<slug>/ (${example})`;
}

export interface Daemon {
  url: string;
  /** Where /metrics is served (the daemon's port, or METER_METRICS_PORT's listener). */
  metricsUrl: string;
  store: Store;
  /** Stops accepting, drains in-flight calls, stops components, closes the store. */
  close(): Promise<void>;
}

export async function startDaemon(
  config: Readonly<Config>,
  logger: Logger,
  /** Builds and starts the daemon's components (src/server/components.ts); default none. */
  compose: Compose = async () => {},
  /** `signal`: a stop asked for while starting (meter start's SIGTERM): ends a wait for the
   *  database at once, or stops right after what is under way (migrations) ends. */
  opts: { signal?: AbortSignal } = {},
): Promise<Daemon> {
  const { limits } = config;
  /** Set once the store is open and every component started; until then only the probes answer. */
  // eslint-disable-next-line prefer-const -- set once, after the handler that reads it exists
  let ready: { store: Store; metrics: DaemonMetrics; routes: [string, Handler][] } | undefined;
  const startup = { reason: 'opening the store' };
  // Not async: a proxied call is answered without a promise of its own per request.
  const handle = (req: IncomingMessage, res: ServerResponse): void | Promise<void> => {
    if (!ready) return answerWhileStarting(req, res, startup.reason);
    if (isOverLimit(req.socket)) {
      res.shouldKeepAlive = false;
      return sendError(
        res,
        503,
        'overloaded',
        `more than ${limits.maxConnections} open connections (METER_MAX_CONNECTIONS): retry later`,
        { headers: { 'retry-after': 1 } },
      );
    }
    if (req.rawHeaders.length > limits.maxHeaders * 2) {
      res.shouldKeepAlive = false;
      return sendError(
        res,
        431,
        'headers_too_large',
        `more than ${limits.maxHeaders} request headers (METER_MAX_HEADERS)`,
      );
    }
    const url = req.url ?? '/';
    const { store, metrics, routes } = ready;
    if (url === '/healthz') return sendJson(res, 200, { status: 'ok' });
    if (url === '/readyz') {
      return store
        .ping()
        .then((ok) => sendJson(res, ok ? 200 : 503, { status: ok ? 'ready' : 'store unreachable', store: store.kind }));
    }
    if (url === '/metrics' || url.startsWith('/metrics?'))
      return handleMetricsOnProxyPort(req, res, metrics, logger, config.metricsPort);
    for (const [prefix, handler] of routes) if (url.startsWith(prefix)) return handler(req, res);
    sendError(res, 404, 'not_found', noRouteMessage(req.method!, url.split('?')[0]!));
  };

  // Every connection, and the responses in progress on each: a draining shutdown closes the
  // idle ones at once (Node's closeIdleConnections misses a socket that never sent a request).
  const sockets = new Set<Socket>();
  /** A socket's responses in progress (none: the socket is idle). Kept for the socket's life,
   *  so a keep-alive connection does not make a Set per request. */
  const inFlight = new Map<Socket, Set<ServerResponse>>();
  let draining = false;
  const track = (req: IncomingMessage, res: ServerResponse) => {
    // Draining: this response says `Connection: close` and its socket closes after it, so a
    // keep-alive client sends its next call elsewhere instead of to a daemon on its way out.
    if (draining) res.shouldKeepAlive = false;
    const socket = req.socket;
    let open = inFlight.get(socket);
    if (!open) inFlight.set(socket, (open = new Set()));
    open.add(res);
    res.on('close', () => open.delete(res)); // a response closes once
  };
  const failed = (req: IncomingMessage, res: ServerResponse, err: Error) => {
    const user = userError(err);
    if (user) return sendError(res, user.status, user.code, user.message);
    if (clientWentAway(req, err)) {
      // Routine: a client that hung up mid-request is told nothing and logged without a stack.
      logger.info({ method: req.method, code: (err as { code?: string }).code }, 'client went away mid-request');
      res.destroy();
      return;
    }
    logger.error({ err }, 'request failed');
    sendError(res, 500, 'internal_error', 'internal error in meter');
  };

  const server = createServer(
    {
      keepAliveTimeout: 65_000,
      maxHeaderSize: limits.maxHeaderBytes,
      headersTimeout: limits.headersTimeoutMs,
      // Receiving a whole request body (not the response) may take this long.
      requestTimeout: Math.max(300_000, limits.headersTimeoutMs),
      // How often those two timeouts are checked (Node's default, 30 s, would let slow clients linger).
      connectionsCheckingInterval: Math.min(1_000, limits.headersTimeoutMs),
    },
    (req, res) => {
      // One 'request' listener: tracking, then the answer.
      track(req, res);
      try {
        handle(req, res)?.catch((err: Error) => failed(req, res, err));
      } catch (err) {
        failed(req, res, err as Error);
      }
    },
  );
  // Every header is parsed (their bytes are capped by maxHeaderSize): with a count cap, Node drops
  // the headers past it, Host among them when it comes last, and answers a bare 400 itself.
  // `handle` answers a request over METER_MAX_HEADERS with the 431 JSON error instead.
  server.maxHeadersCount = 0;
  answerClientErrors(server, limits);
  server.on('connection', (socket: Socket) => {
    if (sockets.size >= limits.maxConnections) markOverLimit(socket);
    sockets.add(socket);
    socket.once('close', () => {
      sockets.delete(socket);
      inFlight.delete(socket);
    });
  });
  // Listen first: /healthz answers 200 and /readyz 503 with the reason from the first moment,
  // so a liveness probe does not restart a sidecar whose database is late.
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const stopListening = () => new Promise<void>((resolve) => server.close(() => resolve()));
  const { store, metrics, components, routes } = await openAndStart(
    config,
    logger,
    compose,
    opts.signal,
    startup,
  ).catch(async (err: unknown) => {
    server.closeAllConnections();
    await stopListening();
    throw err;
  });
  let metricsServer: MetricsServer | undefined;
  try {
    if (config.metricsPort !== undefined)
      metricsServer = await startMetricsServer(config.host, config.metricsPort, metrics, logger);
  } catch (err) {
    server.close();
    for (const c of components.reverse()) await c.stop?.();
    await store.close();
    throw err;
  }
  ready = { store, metrics, routes };
  const { port } = server.address() as AddressInfo;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  const url = `http://${host}:${port}`;
  const metricsUrl = metricsServer?.url ?? `${url}/metrics`;
  if (metricsServer) logger.info({ url: metricsUrl }, 'metrics served on their own port');
  warnIfExposed(config, logger);
  // CLI commands reach an embedded store through the daemon, never through this port.
  const admin =
    store.kind === 'embedded' && store.setAdmin
      ? await startAdminServer(
          store,
          config.dataDir,
          { smtpUrl: config.smtpUrl, pricesFile: config.pricesFile },
          logger,
        )
      : undefined;
  if (admin) store.setAdmin!(admin);

  let closing: Promise<void> | undefined;
  return {
    url,
    metricsUrl,
    store,
    close() {
      closing ??= (async () => {
        // Stop accepting; idle keep-alive sockets go now; calls in flight finish, and each
        // response not yet begun says `Connection: close`, so no socket takes another call. A
        // socket whose response had begun (a stream) is closed by the sweep once it goes idle;
        // past the drain limit every connection is cut.
        draining = true;
        const t0 = Date.now();
        const drained = new Promise<void>((resolve) => server.close(() => resolve()));
        for (const open of inFlight.values()) for (const res of open) if (!res.headersSent) res.shouldKeepAlive = false;
        const closeIdle = () => {
          for (const socket of sockets) if (!inFlight.get(socket)?.size) socket.destroy();
        };
        closeIdle();
        const sweep = new PeriodicTask(async () => closeIdle(), { what: 'drain: idle sockets', logger, pauseMs: 100 });
        void sweep.start('after-pause');
        const limit = setTimeout(() => {
          logger.warn(
            { afterMs: DRAIN_LIMIT_MS },
            'calls still in flight at the drain limit: closing their connections',
          );
          server.closeAllConnections();
        }, DRAIN_LIMIT_MS);
        await drained;
        await metricsServer?.close();
        await sweep.stop();
        clearTimeout(limit);
        logger.info({ ms: Date.now() - t0 }, 'in-flight calls drained');
        for (const c of components.reverse()) {
          try {
            if (!(await settlesWithin(c.stop?.(), STOP_LIMIT_MS)))
              logger.warn({ afterMs: STOP_LIMIT_MS }, `${c.name} did not stop in time; going on`);
          } catch (err) {
            logger.error({ err }, `stopping ${c.name} failed`);
          }
        }
        await admin?.close();
        if (
          !(await settlesWithin(
            store.close().catch(() => {}),
            STORE_CLOSE_LIMIT_MS,
          ))
        ) {
          logger.warn({ afterMs: STORE_CLOSE_LIMIT_MS }, 'the store did not close in time; going on');
        }
        logger.info({ ms: Date.now() - t0 }, 'shutdown complete');
      })();
      return closing;
    },
  };
}

/** Opens the store (waiting for a late database, `startup.reason` saying why) and starts every
 *  component; on a failure, stops what started and closes the store. */
async function openAndStart(
  config: Readonly<Config>,
  logger: Logger,
  compose: Compose,
  signal: AbortSignal | undefined,
  startup: { reason: string },
): Promise<{ store: Store; metrics: DaemonMetrics; components: Component[]; routes: [string, Handler][] }> {
  const store = await openStoreWhenUp(config, logger, signal, (why) => (startup.reason = why));
  if (signal?.aborted) {
    await store.close();
    throw new StartAborted();
  }
  // The mode and the server's versions, once: which storage this sidecar really runs on.
  logger.info(await describeStore(store).catch(() => ({ store: store.kind })), `store: ${store.kind}`);
  const metrics = new DaemonMetrics();
  registerDaemonMetrics(metrics, store);
  const ctx: DaemonContext = { config, logger, store, metrics };
  const components: Component[] = [];
  const routes: [string, Handler][] = [];
  const start = async <C extends Component>(component: C): Promise<C> => {
    await component.start?.();
    components.push(component);
    for (const [prefix, handler] of Object.entries(component.routes ?? {})) routes.push([prefix, handler]);
    return component;
  };
  try {
    await compose(ctx, start);
  } catch (err) {
    for (const c of components.reverse()) await c.stop?.();
    await store.close();
    throw err;
  }

  return { store, metrics, components, routes };
}

/** The request failed because its client closed the connection before sending all of it. */
const CLIENT_GONE_CODES = new Set(['ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ERR_STREAM_PREMATURE_CLOSE']);
function clientWentAway(req: IncomingMessage, err: Error): boolean {
  const code = (err as { code?: string }).code;
  return !req.complete && (req.socket.destroyed || (code !== undefined && CLIENT_GONE_CODES.has(code)));
}

/** Before the store is open: the process is alive (/healthz 200), not ready (/readyz 503 with
 *  the reason), and every other route answers 503 `starting` with Retry-After. */
function answerWhileStarting(req: IncomingMessage, res: ServerResponse, reason: string): void {
  const url = req.url ?? '/';
  if (url === '/healthz') return sendJson(res, 200, { status: 'ok' });
  if (url === '/readyz') return sendJson(res, 503, { status: 'starting', reason });
  sendError(res, 503, 'starting', `meter is starting (${reason}): retry shortly`, { headers: { 'retry-after': 1 } });
}

/** Whether the store answers (one short query per scrape), and what this daemon runs on. */
function registerDaemonMetrics(metrics: DaemonMetrics, store: Store): void {
  metrics.gauge(
    'meter_store_up',
    'Whether the store answered a query at scrape time (1) or not (0)',
    ['store'],
    async (emit) => {
      let up = false;
      const answered = await settlesWithin(
        store.ping().then((ok) => (up = ok)),
        2_000,
      );
      emit({ store: store.kind }, answered && up ? 1 : 0);
    },
  );
}
