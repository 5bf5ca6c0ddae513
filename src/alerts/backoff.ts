/** When a failed delivery is tried again. Production: 5 s, 10 s, 20 s, … doubling, each wait at
 *  most 1 h, given up (status failed) once the next try would come more than 24 h after the
 *  alert was queued. Tests shrink these. */
export interface RetryPolicy {
  firstRetryMs: number;
  maxDelayMs: number;
  giveUpAfterMs: number;
}

export const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy> = Object.freeze({
  firstRetryMs: 5_000,
  maxDelayMs: 3_600_000,
  giveUpAfterMs: 24 * 3_600_000,
});

/** The wait after the `attempts`-th failed attempt (1 = the first attempt failed). */
export function retryDelayMs(policy: RetryPolicy, attempts: number): number {
  const exp = Math.min(Math.max(attempts - 1, 0), 40); // 2^40 × anything is past any cap
  return Math.min(policy.firstRetryMs * 2 ** exp, policy.maxDelayMs);
}
