import { STATUS_CODES, type Server } from 'node:http';
import { isIPv4, isIPv6, type Socket } from 'node:net';
import { isLoopback } from '../metrics/endpoint.js';
import type { Config, Limits } from '../config.js';
import type { Logger } from '../log.js';
import { errorBody, type ErrorCode } from '../http.js';

/** The service's own error as raw bytes, for a socket that has no ServerResponse (yet). */
function rawError(status: number, code: ErrorCode, message: string, extra = ''): string {
  const body = errorBody(status, code, message);
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json\r\n` +
    `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n${extra}\r\n${body}`
  );
}

/**
 * The limits Node's HTTP parser enforces, answered with the service's JSON errors instead of
 * Node's bare ones: headers over METER_MAX_HEADER_BYTES (431), headers not complete within
 * METER_HEADERS_TIMEOUT_MS (408: slow clients), and any malformed or ambiguous request (400:
 * e.g. Content-Length with Transfer-Encoding, two different Content-Lengths — smuggling).
 */
export function answerClientErrors(server: Server, limits: Limits): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    let reply: string;
    if (err.code === 'HPE_HEADER_OVERFLOW') {
      reply = rawError(
        431,
        'headers_too_large',
        `request headers over ${limits.maxHeaderBytes} bytes (METER_MAX_HEADER_BYTES)`,
      );
    } else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      reply = rawError(
        408,
        'request_timeout',
        `request not received within ${limits.headersTimeoutMs} ms (METER_HEADERS_TIMEOUT_MS)`,
      );
    } else {
      reply = rawError(400, 'bad_request', `malformed HTTP request (${err.code ?? 'parse error'})`);
    }
    socket.end(reply);
    setTimeout(() => socket.destroy(), 1_000).unref();
  });
}

const MARK = Symbol('meter.overLimit');

/** Connections past METER_MAX_CONNECTIONS are marked; their first request gets 503 and the
 *  connection is closed, so a flood cannot starve the file descriptors of every other client. */
export function markOverLimit(socket: Socket): void {
  (socket as Socket & { [MARK]?: true })[MARK] = true;
}
export const isOverLimit = (socket: Socket): boolean => (socket as Socket & { [MARK]?: true })[MARK] === true;

/** A host that other machines can reach (anything but a loopback address or `localhost`). */
export function isExposed(host: string): boolean {
  if (host === 'localhost') return false;
  if (isIPv4(host) || isIPv6(host)) return !isLoopback(host);
  return true; // a host name: assume it resolves to an outside interface
}

/** METER_HOST that other machines reach: say exactly what they can reach. */
export function warnIfExposed(config: Pick<Config, 'host' | 'metricsPort'>, logger: Pick<Logger, 'warn'>): void {
  if (!isExposed(config.host)) return;
  const metrics =
    config.metricsPort === undefined
      ? '/metrics answers loopback peers only'
      : `/metrics is served to any peer on port ${config.metricsPort} (METER_METRICS_PORT)`;
  logger.warn(
    {
      host: config.host,
      exposed: ['/proxy/', '/analytics/', '/healthz', '/readyz'],
      metricsPort: config.metricsPort ?? null,
    },
    `METER_HOST=${config.host}: other hosts can reach /proxy/ and /analytics/ (service key required), /healthz and /readyz; ` +
      `${metrics}; the admin API is never served on a network port`,
  );
}
