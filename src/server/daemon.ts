import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import { openStore, type Store } from '../store/index.js';
import { createAdminApi } from './admin.js';
import { sendError, sendJson } from './errors.js';

/** The longest a shutdown waits for in-flight calls (long streams) before cutting them. */
const DRAIN_LIMIT_MS = 30_000;

export type Handler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

/** A part of the daemon with a lifetime: started after the store opens, stopped in reverse
 *  order on shutdown (after the server has drained its in-flight requests). */
export interface Component {
  name: string;
  /** Routes it serves, by path prefix (e.g. `/proxy/`). */
  routes?: Record<string, Handler>;
  start?(): Promise<void> | void;
  stop?(): Promise<void> | void;
}

export interface DaemonContext {
  config: Readonly<Config>;
  logger: Logger;
  store: Store;
}

export interface Daemon {
  url: string;
  store: Store;
  /** Stops accepting, drains in-flight calls, stops components, closes the store. */
  close(): Promise<void>;
}

/** Components of the daemon, in start order. Each feature adds its own here. */
export type ComponentFactory = (ctx: DaemonContext) => Component | Promise<Component>;

export async function startDaemon(
  config: Readonly<Config>,
  logger: Logger,
  factories: ComponentFactory[] = [],
): Promise<Daemon> {
  const store = await openStore(config);
  const ctx: DaemonContext = { config, logger, store };
  const components: Component[] = [];
  const routes: [string, Handler][] = [];
  try {
    for (const factory of factories) {
      const component = await factory(ctx);
      await component.start?.();
      components.push(component);
      for (const [prefix, handler] of Object.entries(component.routes ?? {})) routes.push([prefix, handler]);
    }
  } catch (err) {
    for (const c of components.reverse()) await c.stop?.();
    await store.close();
    throw err;
  }
  const admin = store.kind === 'embedded' && store.setAdmin ? createAdminApi(store) : undefined;

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = req.url ?? '/';
    if (url === '/healthz') return sendJson(res, 200, { status: 'ok' });
    if (url === '/readyz') {
      const ok = await store.ping();
      return sendJson(res, ok ? 200 : 503, { status: ok ? 'ready' : 'store unreachable', store: store.kind });
    }
    if (admin && url.startsWith('/admin/')) return admin.handle(req, res);
    for (const [prefix, handler] of routes) if (url.startsWith(prefix)) return handler(req, res);
    sendError(res, 404, 'not_found', `no route for ${req.method} ${url.split('?')[0]}`);
  };

  const server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    Promise.resolve(handle(req, res)).catch((err: Error) => {
      logger.error({ err: { message: err.message, stack: err.stack } }, 'request failed');
      sendError(res, 500, 'internal_error', 'internal error in meter');
    });
  });
  // Every connection, and those with a request in progress: a draining shutdown closes the
  // rest at once (Node's closeIdleConnections misses a socket that never sent a request).
  const sockets = new Set<Socket>();
  const busy = new Map<Socket, number>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    busy.set(socket, (busy.get(socket) ?? 0) + 1);
    res.once('close', () => {
      const n = (busy.get(socket) ?? 1) - 1;
      if (n > 0) busy.set(socket, n);
      else busy.delete(socket);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  const url = `http://${host}:${port}`;
  if (admin) store.setAdmin!(url, admin.token);

  let closing: Promise<void> | undefined;
  return {
    url,
    store,
    close() {
      closing ??= (async () => {
        // Stop accepting; idle keep-alive sockets go now, in-flight calls finish first. A socket
        // that goes idle while draining (or opened without ever sending a request) is closed
        // on the next sweep; past the drain limit every connection is cut.
        const drained = new Promise<void>((resolve) => server.close(() => resolve()));
        const closeIdle = () => {
          for (const socket of sockets) if (!busy.has(socket)) socket.destroy();
        };
        closeIdle();
        const sweep = setInterval(closeIdle, 100);
        const limit = setTimeout(() => {
          logger.warn({ afterMs: DRAIN_LIMIT_MS }, 'calls still in flight at the drain limit: closing their connections');
          server.closeAllConnections();
        }, DRAIN_LIMIT_MS);
        await drained;
        clearInterval(sweep);
        clearTimeout(limit);
        for (const c of components.reverse()) {
          try {
            await c.stop?.();
          } catch (err) {
            logger.error({ err: { message: (err as Error).message } }, `stopping ${c.name} failed`);
          }
        }
        await store.close();
      })();
      return closing;
    },
  };
}
