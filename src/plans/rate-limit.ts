/** RateLimit-* header values for one call (draft IETF RateLimit fields, as the contract names them). */
export interface RateLimitState {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the window resets. */
  resetSeconds: number;
}

const MINUTE = 60_000;

/**
 * Per-key calls per minute, in fixed windows aligned to the minute. In memory on each sidecar:
 * a key used through several sidecars at once gets the limit on each (README says so).
 * O(1) per call, one small record per key.
 */
export class RateLimiter {
  readonly #windows = new Map<string, { window: number; count: number }>();

  /** Takes a slot when one is free. */
  take(keyId: string, limit: number, now = Date.now()): RateLimitState {
    const window = Math.floor(now / MINUTE);
    let w = this.#windows.get(keyId);
    if (!w || w.window !== window) {
      w = { window, count: 0 };
      this.#windows.set(keyId, w);
    }
    const allowed = w.count < limit;
    if (allowed) w.count++;
    return state(allowed, limit, w.count, window, now);
  }

  /** Whether a slot is free, and the headers as they stand; takes nothing. */
  peek(keyId: string, limit: number, now = Date.now()): RateLimitState {
    const window = Math.floor(now / MINUTE);
    const w = this.#windows.get(keyId);
    const count = w && w.window === window ? w.count : 0;
    return state(count < limit, limit, count, window, now);
  }

  /** Drops windows that ended (called from the periodic refresh, never on the hot path). */
  prune(now = Date.now()): void {
    const window = Math.floor(now / MINUTE);
    for (const [key, w] of this.#windows) if (w.window < window) this.#windows.delete(key);
  }
}

function state(allowed: boolean, limit: number, count: number, window: number, now: number): RateLimitState {
  return {
    allowed,
    limit,
    remaining: Math.max(0, limit - count),
    resetSeconds: Math.max(1, Math.ceil(((window + 1) * MINUTE - now) / 1000)),
  };
}

export function rateLimitHeaders(s: RateLimitState): Record<string, string> {
  return {
    'ratelimit-limit': String(s.limit),
    'ratelimit-remaining': String(s.remaining),
    'ratelimit-reset': String(s.resetSeconds),
  };
}
