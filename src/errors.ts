/**
 * The one base class of errors meant for the user (as undici's lib/core/errors.js has one): a
 * leaf, so every floor may throw them. Whoever answers maps them once: the HTTP layer and the
 * admin API to `status` and an error body with `code`, the CLI to `exitCode` and one line.
 * Anything else thrown is a bug or an outage: a 500 (exit 1) whose details go to the log.
 */

/** The service's error codes (CONTRACT §3): the `code` of an error body. */
export type ErrorCode =
  | 'invalid_tags'
  | 'invalid_parameter'
  | 'invalid_api_key'
  | 'budget_exceeded'
  | 'unpriced_model'
  | 'plan_required'
  | 'unknown_provider'
  | 'not_found'
  | 'rate_limited'
  | 'quota_exceeded'
  | 'upstream_unreachable'
  | 'upstream_timeout'
  | 'method_not_allowed'
  | 'internal_error'
  | 'forbidden'
  // Limits of the daemon's port (README "Security").
  | 'invalid_path'
  | 'request_too_large'
  | 'headers_too_large'
  | 'request_timeout'
  | 'bad_request'
  | 'overloaded'
  // The daemon listens before its store is open (/healthz answers at once).
  | 'starting';

/** An error whose message is complete for the user: what was wrong and what is allowed. A
 *  subclass overrides what differs (a usage error exits 2; a missing thing is a 404). */
export class MeterError extends Error {
  override name = 'MeterError';
  /** Stable and machine-readable: the error body's `code`. */
  readonly code: ErrorCode = 'invalid_parameter';
  /** The HTTP status it is answered with. */
  readonly status: number = 400;
  /** The CLI's exit code: 1 a runtime failure the user can act on, 2 a usage error. */
  readonly exitCode: 1 | 2 = 1;
}
