/**
 * The one base class of meter's errors (as undici's lib/core/errors.js has one): a leaf, so
 * every floor may throw them. A user error (status below 500) is answered as itself: the HTTP
 * layer and the admin API send its `status` and an error body with its `code` (`userError`),
 * the CLI prints its one line and exits with `exitCode` (`cliFailure`). A `MeterFailure` (a
 * store, a lock, a directory that failed us) and anything else thrown is a 500 whose details go
 * to the log; the CLI prints its line and exits 1.
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

/** Not the caller's mistake: meter or what it depends on failed. Answered 500, logged. */
export class MeterFailure extends MeterError {
  override name = 'MeterFailure';
  override readonly code: ErrorCode = 'internal_error';
  override readonly status: number = 500;
}

/** What a request may be answered with as it is: a MeterError below 500; else undefined (log it, answer 500). */
export function userError(err: unknown): MeterError | undefined {
  return err instanceof MeterError && err.status < 500 ? err : undefined;
}

/** CONTRACT §1: 2 for a usage error (a bad flag, argument or setting), 1 for a runtime failure. */
export function exitCodeOf(err: unknown): number {
  return err instanceof MeterError ? err.exitCode : 1;
}

/** The CLI's translation of anything thrown (CONTRACT §1): one line (the stack only when
 *  debugging; a driver's multi-line message joined) and the exit code. */
export function cliFailure(err: unknown, debug = false): { line: string; exitCode: number } {
  const e = err as Error;
  const text = debug
    ? (e.stack ?? e.message)
    : String(e.message)
        .replace(/\s*\n\s*/g, ' ')
        .trim();
  return { line: `meter: ${text}\n`, exitCode: exitCodeOf(err) };
}
