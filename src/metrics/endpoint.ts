import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../log.js';
import { closeIfBodyUnread, sendError, sendJson } from '../http.js';
import type { DaemonMetrics } from './registry.js';

/** 127.0.0.0/8 and ::1, also as IPv4-mapped IPv6 addresses. */
export function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : address;
  return v4.startsWith('127.') || address === '::1';
}

/** Writes the text exposition (no service key: it holds no key, account or tag value). */
export async function sendMetrics(
  res: ServerResponse,
  metrics: DaemonMetrics,
  logger: Pick<Logger, 'error'>,
): Promise<void> {
  try {
    const text = await metrics.scrape();
    closeIfBodyUnread(res);
    res.writeHead(200, { 'content-type': metrics.contentType, 'content-length': Buffer.byteLength(text) });
    res.end(text);
  } catch (err) {
    logger.error({ err }, 'metrics: scrape failed');
    sendError(res, 500, 'internal_error', 'metrics could not be collected');
  }
}

/**
 * `/metrics` on the daemon's own port: loopback peers only, since that port may be published
 * for the proxy (a container, METER_HOST=0.0.0.0). With METER_METRICS_PORT it is served on its
 * own listener instead, and this answers 404 saying where.
 */
export function handleMetricsOnProxyPort(
  req: IncomingMessage,
  res: ServerResponse,
  metrics: DaemonMetrics,
  logger: Pick<Logger, 'error'>,
  metricsPort: number | undefined,
): void | Promise<void> {
  if (metricsPort !== undefined) {
    return sendError(res, 404, 'not_found', `/metrics is served on its own port (METER_METRICS_PORT=${metricsPort})`);
  }
  if (!isLoopback(req.socket.remoteAddress)) {
    return sendError(
      res,
      403,
      'forbidden',
      '/metrics on this port answers loopback clients only; set METER_METRICS_PORT to serve it to others',
    );
  }
  return sendMetrics(res, metrics, logger);
}

export interface MetricsServer {
  url: string;
  close(): Promise<void>;
}

/** METER_METRICS_PORT: a listener that serves `/metrics` (and `/healthz`) to any peer. */
export async function startMetricsServer(
  host: string,
  port: number,
  metrics: DaemonMetrics,
  logger: Pick<Logger, 'error'>,
): Promise<MetricsServer> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD')
      return sendError(res, 405, 'method_not_allowed', 'only GET is served here');
    if (path === '/metrics') return void sendMetrics(res, metrics, logger);
    if (path === '/healthz') return sendJson(res, 200, '{"status":"ok"}');
    sendError(res, 404, 'not_found', `no route for ${req.method} ${path}: this port serves /metrics`);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const shown = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${shown}:${address.port}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
