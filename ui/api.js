// The analytics API of this daemon: the key goes in a header only (never the URL, never a
// cookie: credentials are omitted), no referrer, no cache.
import { parseJson } from './numbers.js';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** GETs a path with the key; the answer's JSON with money exact, or an ApiError. */
export async function get(path, key) {
  let res;
  try {
    res = await fetch(path, {
      headers: { authorization: `Bearer ${key}` },
      cache: 'no-store',
      credentials: 'omit',
      referrerPolicy: 'no-referrer',
    });
  } catch {
    throw new ApiError(0, 'unreachable', 'meter is not answering: is the daemon running?');
  }
  const text = await res.text();
  let body;
  try {
    body = parseJson(text);
  } catch {
    body = undefined;
  }
  if (res.ok && body !== undefined) return body;
  const error = body && body.error;
  throw new ApiError(res.status, error ? error.code : 'bad_answer', error ? error.message : `HTTP ${res.status}`);
}

/** What went wrong, in words; for a 5xx, /readyz tells whether meter reaches its database. */
export async function explain(err) {
  if (err.status === 401) return `The key was refused: ${err.message}`;
  if (err.status !== 0 && err.status < 500) return err.message;
  try {
    const ready = await (await fetch('/readyz', { cache: 'no-store', credentials: 'omit' })).json();
    if (ready.status === 'store unreachable')
      return 'meter cannot reach its database right now, so there are no figures to show. They come back once the database answers: try Refresh in a moment.';
    if (ready.status === 'starting') return `meter is starting (${ready.reason}): try Refresh in a moment.`;
  } catch {
    // /readyz did not answer either: the daemon itself is away.
    return 'meter is not answering: is the daemon running?';
  }
  return `meter answered ${err.status}: ${err.message}`;
}
