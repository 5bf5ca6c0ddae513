import type { Principal } from '../auth/types.js';
import type { BudgetBook, MatchedBudget } from '../budget/book.js';
import { refusalMessage, type ShadowGate } from '../budget/gate.js';
import { scopeText } from '../budget/scope.js';
import {
  DEFAULT_WORST_OUTPUT_TOKENS,
  priceWorstCase,
  worstCaseTokens,
  type PricedCall,
  type WorstCost,
} from '../budget/worst-case.js';
import { windowBounds } from '../calendar.js';
import type { Plan, PlanBook } from '../plans/plans.js';
import type { Pricer } from '../pricing/index.js';
import type { Admission } from '../proxy/handler.js';
import type { Queryable } from '../store/types.js';
import type { Lease, LimitSpec } from './lease.js';
import type { FleetLedger, Need, Verdict } from './ledger.js';
import { limitKey, type FleetLimit } from './limit-key.js';

/** An account's (key '') or a key's own per-minute limits, in place of the plan's. */
export interface Override {
  callsPerMinute: number | null;
  tokensPerMinute: number | null;
}

/** The limit overrides, in memory, reloaded when the fleet's change counter moves. */
export class OverrideBook {
  #byId = new Map<string, Override>();

  async reload(db: Queryable): Promise<void> {
    const rows = await db.query<{ account_id: string; key_id: string; calls: number | null; tokens: number | null }>(
      `SELECT account_id, key_id, calls_per_minute AS calls, tokens_per_minute AS tokens FROM limit_overrides`,
    );
    this.#byId = new Map(
      rows.map((r) => [`${r.account_id}/${r.key_id}`, { callsPerMinute: r.calls, tokensPerMinute: r.tokens }]),
    );
  }

  get(accountId: string, keyId = ''): Override | undefined {
    // Most fleets have none: no key is built for every call then.
    return this.#byId.size === 0 ? undefined : this.#byId.get(`${accountId}/${keyId}`);
  }
}

/** The per-minute and monthly limits of one call's key and account, after overrides. */
interface CallLimits {
  keyCalls: number;
  keyTokens: number | null;
  accountCalls: number | null;
  accountTokens: number | null;
  quota: number | null;
}

type Refusal = Extract<Admission, { ok: false }>;

/** The budgets of CONTRACT §6: `block` ones are fleet limits here, `shadow` ones the gate's. */
export interface Budgets {
  book: BudgetBook;
  shadows?: ShadowGate;
}

/**
 * Admission of proxied calls against the fleet's limits (CONTRACT §6, docs/fleet.md): the key's
 * and the account's calls and tokens a minute, the plan's monthly quota and the Pro hard cap,
 * all taken from the sidecar's leases at once, all or nothing. A refused call counts against
 * nothing. Every answer carries the key's RateLimit-* headers, as the fleet stands.
 */
export class FleetAdmissions {
  readonly #specs = new Map<string, LimitSpec>();
  /** The budget behind each budget limit by its id, as last matched (for its 402's words). */
  readonly #budgets = new Map<string, MatchedBudget>();

  constructor(
    private readonly plans: PlanBook,
    private readonly overrides: OverrideBook,
    private readonly ledger: FleetLedger,
    private readonly pricer: Pricer,
    private readonly budgets: Budgets,
  ) {}

  /** true when admission needs the request body: a block or shadow budget, or a tokens-a-minute limit. */
  needsBody(p: Principal): boolean {
    if (this.budgets.book.admits(p.accountId)) return true;
    const plan = this.plans.get(p.plan);
    if (!plan) return false;
    const l = this.#limits(p, plan);
    return l.keyTokens !== null || l.accountTokens !== null;
  }

  admit(
    p: Principal,
    call: { id: string; time: Date; priced?: PricedCall; tags?: Record<string, string> },
  ): Admission | Promise<Admission> {
    const plan = this.plans.get(p.plan);
    if (!plan) return { ok: true, headers: {} }; // plans not loaded: never fail a call on metering's account
    const now = Date.now();
    const l = this.#limits(p, plan);
    const needs: Need[] = [{ spec: this.#keyCalls(p, l), units: 1n }];
    if (l.accountCalls !== null)
      needs.push({ spec: this.#minute('calls-per-minute', 'account', p.accountId, l.accountCalls), units: 1n });
    const worst = call.priced ? worstCaseTokens(call.priced) : undefined;
    if (l.keyTokens !== null || l.accountTokens !== null) {
      const tokens = call.priced ? worstTokens(call.priced, worst) : 0n;
      if (tokens > 0n) {
        if (l.keyTokens !== null)
          needs.push({ spec: this.#minute('tokens-per-minute', 'key', p.keyId, l.keyTokens), units: tokens });
        if (l.accountTokens !== null)
          needs.push({
            spec: this.#minute('tokens-per-minute', 'account', p.accountId, l.accountTokens),
            units: tokens,
          });
      }
    }
    if (l.quota !== null) needs.push({ spec: this.#monthly(p.accountId, BigInt(l.quota), now), units: 1n });
    let matched: MatchedBudget[] = [];
    let cost: WorstCost = 0n;
    if (call.priced && this.budgets.book.admits(p.accountId)) {
      const budgetCall = {
        accountId: p.accountId,
        keyId: p.keyId,
        tags: call.tags ?? {},
        provider: call.priced.provider,
      };
      matched = this.budgets.book.matching({ ...budgetCall, model: worst?.model }, now);
      cost = priceWorstCase(this.pricer, call.priced, worst);
      const blocks = matched.filter((b) => b.action === 'block');
      // Nothing bounds what a model without a price costs: a block budget refuses it outright.
      if (cost === 'unpriced' && blocks.length > 0) return this.#unpriced(p, plan, blocks[0]!, worst!.model!);
      // A call that can cost nothing passes; one whose model cannot be known holds all that is left.
      if (cost !== 0n && cost !== 'unpriced')
        for (const b of blocks) needs.push({ spec: this.#budget(b), units: cost ?? 'rest', overdraw: !b.strict });
    }
    const answer = (v: Verdict) => this.#answer(v, call.id, p, plan, needs, matched, cost);
    const verdict = this.ledger.admit(call.id, needs, now);
    return verdict instanceof Promise ? verdict.then(answer) : answer(verdict);
  }

  /** 402 unpriced_model (CONTRACT §3): the call counts against nothing. */
  #unpriced(p: Principal, plan: Plan, b: MatchedBudget, model: string): Admission {
    this.budgets.shadows?.count(b.id, 'block');
    const headers = rateHeaders(this.ledger.lease(this.#keyCalls(p, this.#limits(p, plan))));
    return {
      ok: false,
      status: 402,
      code: 'unpriced_model',
      headers,
      message:
        `model ${JSON.stringify(model)} has no price in meter, so the hard cap of budget ${b.id} ` +
        `(scope ${scopeText(b.scope)}, window ${b.window}) cannot bound its cost; add its price in the file ` +
        'METER_PRICES_FILE names (see `meter pricing show`), or call a priced model',
    };
  }

  /** Frees what an admitted call took when no usage event will settle it. */
  release(callId: string): void {
    this.ledger.release(callId);
    this.budgets.shadows?.release(callId);
  }

  /** The key's RateLimit-* headers as they stand (answers that forward nothing). */
  headers(p: Principal): Record<string, string> {
    const plan = this.plans.get(p.plan);
    if (!plan) return {};
    return rateHeaders(this.ledger.lease(this.#keyCalls(p, this.#limits(p, plan))));
  }

  #limits(p: Principal, plan: Plan): CallLimits {
    const key = this.overrides.get(p.accountId, p.keyId);
    const account = this.overrides.get(p.accountId);
    return {
      keyCalls: key?.callsPerMinute ?? plan.rateLimitPerMinute,
      keyTokens: key?.tokensPerMinute ?? plan.tokensPerMinute,
      accountCalls: account?.callsPerMinute ?? plan.accountCallsPerMinute,
      accountTokens: account?.tokensPerMinute ?? plan.accountTokensPerMinute,
      quota: plan.monthlyCallQuota,
    };
  }

  /** One spec object per limit and amount, reused call after call (`id` names both in memory:
   *  the limit's key and kind are built once, when its spec is). */
  #spec(id: string, make: () => LimitSpec): LimitSpec {
    const cached = this.#specs.get(id);
    if (cached) return cached;
    const spec = make();
    if (this.#specs.size > 100_000) this.#specs.clear(); // old windows and amounts
    this.#specs.set(id, spec);
    return spec;
  }

  /** The key's calls a minute: every call needs it, and its lease gives the RateLimit-* headers. */
  #keyCalls(p: Principal, l: CallLimits): LimitSpec {
    return this.#minute('calls-per-minute', 'key', p.keyId, l.keyCalls);
  }

  #minute(
    kind: 'calls-per-minute' | 'tokens-per-minute',
    of: 'key' | 'account',
    id: string,
    amount: number,
  ): LimitSpec {
    return this.#spec(`${kind}/${of}/${id}=${amount}`, () => {
      const what: FleetLimit = { kind, of, id };
      return { key: limitKey(what), what, windowStart: 0, kind: 'minute', amount: BigInt(amount), offline: 'open' };
    });
  }

  /** The month's calls (the quota), as usage_daily counts them. */
  #monthly(accountId: string, amount: bigint, now: number): LimitSpec {
    const { start, end } = windowBounds('month', now);
    return this.#spec(`monthly-quota/${accountId}@${start}=${amount}`, () => {
      const what: FleetLimit = { kind: 'monthly-quota', accountId };
      return {
        key: limitKey(what),
        what,
        windowStart: start,
        kind: 'written',
        amount,
        offline: 'open',
        used: {
          sql: 'SELECT COALESCE(sum(requests), 0) FROM usage_daily WHERE account_id = $1 AND day >= $2::date AND day < $3::date',
          params: [accountId, day(start), day(end)],
        },
      };
    });
  }

  /** A block budget's window, its spend in units of 1e-8 USD as the budget's exact statement reads it. */
  #budget(b: MatchedBudget): LimitSpec {
    this.#budgets.set(b.id, b);
    return this.#spec(`budget/${b.id}@${b.windowStart}=${b.amountUnits}`, () => {
      const what: FleetLimit = { kind: 'budget', budgetId: b.id };
      const q = this.budgets.book.spendQuery(b, { start: b.windowStart, end: b.windowEnd });
      return {
        key: limitKey(what),
        what,
        windowStart: b.windowStart,
        kind: 'written',
        amount: b.amountUnits,
        offline: 'closed',
        used: { sql: `SELECT round(COALESCE(s.spend::numeric, 0) * 100000000) FROM (${q.sql}) s`, params: q.params },
      };
    });
  }

  #answer(
    v: Verdict,
    callId: string,
    p: Principal,
    plan: Plan,
    needs: Need[],
    matched: MatchedBudget[],
    cost: WorstCost,
  ): Admission {
    const headers = rateHeaders(this.ledger.lease(needs[0]!.spec));
    if (v.ok) {
      const wouldBlock = this.budgets.shadows?.check(callId, matched, cost, Date.now()) ?? [];
      return wouldBlock.length ? { ok: true, headers, wouldBlock } : { ok: true, headers };
    }
    const lease = this.ledger.lease(v.limit);
    const b = v.limit.what?.kind === 'budget' ? this.#budgets.get(v.limit.what.budgetId) : undefined;
    if (b) this.budgets.shadows?.count(b.id, 'block');
    const worst = typeof cost === 'bigint' ? cost : undefined;
    return { ...refusal(v, p, plan, b, lease, worst), headers: { ...headers, ...retry(v, lease) } };
  }
}

function refusal(
  v: Extract<Verdict, { ok: false }>,
  p: Principal,
  plan: Plan,
  budget: MatchedBudget | undefined,
  lease: Lease,
  worst: bigint | undefined,
): Omit<Refusal, 'headers'> {
  const { what, amount } = v.limit;
  const n = String(amount);
  const reset = lease.resetSeconds(Date.now());
  if (budget) {
    const spent = lease.used + lease.othersHeld + lease.held;
    const where = `[budget ${budget.id}, scope ${budget.scope.kind}, window ${budget.window} from ${new Date(budget.windowStart).toISOString()} (${budget.timezone})]`;
    const message = v.offline
      ? `the hard cap of budget ${budget.id} cannot confirm room for this call: the database is unreachable ` +
        `and this sidecar's slice of the budget is used up or lapsed; calls resume when it answers ${where}`
      : refusalMessage(budget, spent, worst, budget.accountBudget ? p.accountName : undefined);
    return { ok: false, status: 402, code: 'budget_exceeded', message };
  }
  if (what?.kind === 'monthly-quota') {
    return {
      ok: false,
      status: 429,
      code: 'quota_exceeded',
      message: `monthly quota of ${n} proxied calls on the ${plan.name} plan is used up until the next month (UTC); upgrade with: meter accounts set-plan ${p.accountName} pro`,
    };
  }
  const units = what?.kind === 'calls-per-minute' ? 'calls' : 'tokens';
  const whose = what && 'of' in what && what.of === 'key' ? 'per key' : `for account ${p.accountName}`;
  return {
    ok: false,
    status: 429,
    code: 'rate_limited',
    message: `rate limit of ${n} ${units} a minute ${whose} reached (${plan.name} plan or its override); retry in ${reset} s`,
  };
}

function retry(v: Extract<Verdict, { ok: false }>, lease: Lease): Record<string, string> {
  const now = Date.now();
  if (v.limit.what?.kind === 'monthly-quota')
    return { 'retry-after': String(Math.max(1, Math.ceil((windowBounds('month', now).end - now) / 1000))) };
  if (v.limit.kind === 'minute') return { 'retry-after': String(lease.resetSeconds(now)) };
  return {};
}

function rateHeaders(lease: Lease): Record<string, string> {
  return {
    'ratelimit-limit': String(lease.spec.amount),
    'ratelimit-remaining': String(lease.remaining()),
    'ratelimit-reset': String(lease.resetSeconds(Date.now())),
  };
}

/** Input and output tokens a call may use at most (a body too large to find its model in
 *  counts a token a byte and the default output limit). */
function worstTokens(call: PricedCall, worst: ReturnType<typeof worstCaseTokens>): bigint {
  if (worst === undefined) return BigInt(call.bodyBytes + DEFAULT_WORST_OUTPUT_TOKENS);
  return BigInt(worst.inputTokens + worst.outputTokens);
}

const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
