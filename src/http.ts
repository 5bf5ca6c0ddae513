import type { ServerResponse } from 'node:http';

import type { ErrorCode } from './errors.js';

export type { ErrorCode } from './errors.js';

/** A query parameter's value, or the parameter that was wrong and why (a 400 `invalid_parameter`). */
export type ParamResult<T> = { ok: true; value: T } | { ok: false; param: string; message: string };

const TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  405: 'invalid_request_error',
  408: 'timeout_error',
  413: 'invalid_request_error',
  429: 'rate_limit_error',
  431: 'invalid_request_error',
  500: 'api_error',
  502: 'api_error',
  503: 'api_error',
  504: 'timeout_error',
};

/** The service's own error (CONTRACT §3): the chat-completions envelope, or Anthropic's own
 *  shape on /proxy/anthropic so its SDK surfaces the message. */
export function errorBody(
  status: number,
  code: ErrorCode,
  message: string,
  shape: 'default' | 'anthropic' = 'default',
): string {
  return JSON.stringify(
    shape === 'anthropic'
      ? { type: 'error', error: { type: code, message } }
      : { error: { type: TYPES[status] ?? 'api_error', code, message } },
  );
}

/**
 * An answer the daemon gives itself closes the connection when the request's body is still
 * arriving: keeping the connection would mean reading that body to its end first (Node drains
 * it for the next request), however large it was declared. A request already whole keeps it.
 */
export function closeIfBodyUnread(res: ServerResponse): void {
  if (res.req && !res.req.complete) res.shouldKeepAlive = false;
}

export function sendError(
  res: ServerResponse,
  status: number,
  code: ErrorCode,
  message: string,
  opts: { shape?: 'default' | 'anthropic'; headers?: Record<string, string | number> } = {},
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = errorBody(status, code, message, opts.shape);
  closeIfBodyUnread(res);
  res.writeHead(status, {
    ...opts.headers,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

export function sendJson(
  res: ServerResponse,
  status: number,
  value: unknown,
  headers: Record<string, string | number> = {},
): void {
  const body = typeof value === 'string' ? value : JSON.stringify(value);
  closeIfBodyUnread(res);
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
