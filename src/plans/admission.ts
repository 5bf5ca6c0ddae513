import type { Principal } from '../auth/types.js';
import type { ErrorCode } from '../server/errors.js';
import type { PlanBook } from './plans.js';
import { windowBounds } from '../calendar.js';
import type { CallRef, QuotaTracker } from './quota.js';
import { rateLimitHeaders, type RateLimiter } from './rate-limit.js';

export type Admission =
  | { ok: true; headers: Record<string, string> }
  | { ok: false; status: number; code: ErrorCode; message: string; headers: Record<string, string> };

/** A refusal decided after the plan's checks (the hard cap's 402). */
export type Gate = () => { status: number; code: ErrorCode; message: string } | undefined;

/**
 * The plan's in-memory pre-flight checks for one proxied call: the per-key rate limit, then the
 * account's monthly call quota, then an optional gate (the hard cap). Only an admitted call
 * takes a rate-limit slot and counts toward the quota: a 429 or 402 counts against nothing.
 * No I/O. Every answer carries the RateLimit-* headers.
 */
export class Admissions {
  constructor(
    private readonly plans: PlanBook,
    private readonly limiter: RateLimiter,
    private readonly quota: QuotaTracker,
  ) {}

  /** `call` names the call's usage event (the quota counts it until a re-read shows it). */
  admit(
    principal: Principal,
    { gate, call, now = Date.now() }: { gate?: Gate; call?: CallRef; now?: number } = {},
  ): Admission {
    const refused = this.check(principal, now);
    if (!refused.ok) return refused;
    const refusal = gate?.();
    if (refusal) return { ok: false, ...refusal, headers: refused.headers };
    const plan = this.plans.get(principal.plan);
    if (!plan) return { ok: true, headers: {} };
    const rate = this.limiter.take(principal.keyId, plan.rateLimitPerMinute, now);
    this.quota.take(principal.accountId, plan.monthlyCallQuota, now, call);
    return { ok: true, headers: rateLimitHeaders(rate) };
  }

  /** Would the call be admitted by the plan now? Counts nothing. */
  check(principal: Principal, now = Date.now()): Admission {
    const plan = this.plans.get(principal.plan);
    if (!plan) return { ok: true, headers: {} }; // plans not loaded: never fail a call on metering's account
    const rate = this.limiter.peek(principal.keyId, plan.rateLimitPerMinute, now);
    const headers = rateLimitHeaders(rate);
    if (!rate.allowed) {
      return {
        ok: false,
        status: 429,
        code: 'rate_limited',
        message: `rate limit of ${plan.rateLimitPerMinute} calls a minute per key on the ${plan.name} plan reached; retry in ${rate.resetSeconds} s`,
        headers: { ...headers, 'retry-after': String(rate.resetSeconds) },
      };
    }
    if (!this.quota.fits(principal.accountId, plan.monthlyCallQuota, now)) {
      const retry = Math.max(1, Math.ceil((windowBounds('month', now).end - now) / 1000));
      return {
        ok: false,
        status: 429,
        code: 'quota_exceeded',
        message: `monthly quota of ${plan.monthlyCallQuota} proxied calls on the ${plan.name} plan is used up until the next month (UTC); upgrade with: meter accounts set-plan ${principal.accountName} pro`,
        headers: { ...headers, 'retry-after': String(retry) },
      };
    }
    return { ok: true, headers };
  }

  /** The key's RateLimit-* headers as they stand (answers that forward nothing: 400, 404). */
  headers(principal: Principal, now = Date.now()): Record<string, string> {
    const plan = this.plans.get(principal.plan);
    return plan ? rateLimitHeaders(this.limiter.peek(principal.keyId, plan.rateLimitPerMinute, now)) : {};
  }
}
