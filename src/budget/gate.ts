/**
 * The admission gate of the proxy (handler.ts's hard-cap gate): the account budget's hard cap
 * (hard-cap.ts, unchanged) and then, on this sidecar, every other matching `block` and `shadow`
 * budget. In memory only: the spend the monitor last read (≤ 1 s old for an account with
 * recent writes) plus the worst case of this sidecar's calls in flight under the budget plus
 * the real cost of its calls that ended in the last few seconds (which the read spend may not
 * show yet; counted again meanwhile, so the check errs on the side of refusing).
 *
 * This is per sidecar, like hard-cap.ts: the fleet-wide leases (src/fleet) replace it, using
 * BudgetBook.matching and spendQuery.
 */
import type { UsageEvent } from '../metering/event.js';
import { formatUnits, toUnits } from '../money.js';
import { getProvider } from '../providers/index.js';
import type { ProviderSlug } from '../providers/types.js';
import type { MatchedBudget } from './book.js';
import { accountBudgetId } from './definitions.js';
import type { HardCap, HardCapCall } from './hard-cap.js';
import { scopeText } from './scope.js';
import type { ScopedBudgetMonitor } from './scoped-monitor.js';

export interface GateCall extends HardCapCall {
  keyId?: string;
  tags?: Record<string, string>;
}

export type GateDecision = { ok: true; wouldBlock?: string[] } | { ok: false; message: string };

interface Held {
  accountId: string;
  budgets: string[];
  units: bigint;
}

export class BudgetGate {
  /** Refusals per budget id (block: refused; shadow: would have been), for /metrics. */
  readonly refusals = new Map<string, { action: 'block' | 'shadow'; count: number }>();
  readonly #inFlight = new Map<string, Held>();
  /** Per budget: worst cases in flight plus real costs not yet seen by the monitor (units). */
  readonly #pending = new Map<string, bigint>();
  /** Per budget: ended calls whose cost the monitor's last read did not show. */
  readonly #unseen = new Map<string, Map<string, { time: string; units: bigint }>>();

  constructor(
    private readonly cap: HardCap,
    private readonly monitor: ScopedBudgetMonitor,
    private readonly now: () => number = Date.now,
  ) {}

  applies(accountId: string): boolean {
    return this.cap.applies(accountId) || this.monitor.book.gated(accountId);
  }

  admit(call: GateCall): GateDecision {
    if (this.cap.applies(call.accountId)) {
      const d = this.cap.admit(call);
      if (!d.ok) {
        this.#count(accountBudgetId(call.accountId), 'block');
        const month = call.time.toISOString().slice(0, 7);
        return {
          ok: false,
          message: `${d.message} [budget ${accountBudgetId(call.accountId)}, scope account, window month ${month} (UTC)]`,
        };
      }
    }
    if (!this.monitor.book.gated(call.accountId)) return { ok: true };
    const now = this.now();
    const budgets = this.monitor.book
      .matching(
        {
          accountId: call.accountId,
          keyId: call.keyId ?? '',
          tags: call.tags ?? {},
          provider: call.provider,
          model: requestedModel(call),
        },
        now,
      )
      .filter((b) => !b.accountBudget && (b.action === 'block' || b.action === 'shadow'));
    if (budgets.length === 0) return { ok: true };
    // Every reached budget; of the block ones, the tightest (most over its amount) refuses.
    const wouldBlock: string[] = [];
    let refusing: { b: MatchedBudget; committed: bigint } | undefined;
    for (const b of budgets) {
      const committed = (this.monitor.spendOf(b.id, now) ?? 0n) + (this.#pending.get(b.id) ?? 0n);
      if (committed < b.amountUnits) continue;
      if (b.action === 'shadow') wouldBlock.push(b.id);
      else if (!refusing || committed * refusing.b.amountUnits > refusing.committed * b.amountUnits)
        refusing = { b, committed };
    }
    if (refusing) {
      this.cap.release(call.accountId, call.id);
      this.#count(refusing.b.id, 'block');
      return { ok: false, message: refusalMessage(refusing.b, refusing.committed) };
    }
    for (const id of wouldBlock) this.#count(id, 'shadow');
    // Its own worst case is held under each budget until its event says what it cost.
    const worst = this.cap.worstCase(call) ?? budgets.reduce((m, b) => (b.amountUnits > m ? b.amountUnits : m), 0n);
    const ids = budgets.map((b) => b.id);
    this.#inFlight.set(call.id, { accountId: call.accountId, budgets: ids, units: worst });
    this.#add(ids, worst);
    return wouldBlock.length ? { ok: true, wouldBlock } : { ok: true };
  }

  /** Frees a reservation whose call will make no event (the account budget's too). */
  release(accountId: string, id: string): void {
    this.cap.release(accountId, id);
    const held = this.#inFlight.get(id);
    if (!held) return;
    this.#inFlight.delete(id);
    this.#add(held.budgets, -held.units);
  }

  /** A usage event was recorded: its worst case gives way to its real cost until the monitor's
   *  read of each budget's spend shows it. */
  settle(event: Pick<UsageEvent, 'id' | 'cost' | 'time'>): void {
    const held = this.#inFlight.get(event.id);
    if (!held) return;
    this.#inFlight.delete(event.id);
    this.#add(held.budgets, -held.units);
    const units = toUnits(event.cost);
    if (units === 0n) return;
    this.#add(held.budgets, units);
    for (const id of held.budgets) {
      let m = this.#unseen.get(id);
      if (!m) this.#unseen.set(id, (m = new Map()));
      m.set(event.id, { time: event.time, units });
    }
  }

  /** BudgetLedger: the ended calls counted here under a budget (the key of usage_events). */
  unseenEvents(budgetId: string): { id: string; time: string }[] {
    const m = this.#unseen.get(budgetId);
    return m ? [...m].map(([id, e]) => ({ id, time: e.time })) : [];
  }

  /** BudgetLedger: the spend now in force for the budget holds these events. A budget gone from
   *  the book (`forget`) drops everything. */
  seen(budgetId: string, ids: Iterable<string>): void {
    const m = this.#unseen.get(budgetId);
    if (!m) return;
    for (const id of ids) {
      const e = m.get(id);
      if (!e) continue;
      m.delete(id);
      this.#add([budgetId], -e.units);
    }
    if (m.size === 0) this.#unseen.delete(budgetId);
  }

  #add(ids: string[], units: bigint): void {
    for (const id of ids) {
      const next = (this.#pending.get(id) ?? 0n) + units;
      if (next === 0n) this.#pending.delete(id);
      else this.#pending.set(id, next);
    }
  }

  #count(id: string, action: 'block' | 'shadow'): void {
    const r = this.refusals.get(id);
    if (r) r.count++;
    else this.refusals.set(id, { action, count: 1 });
  }
}

/** The model the call asks for, from its body (read whole) or the path (Gemini). */
function requestedModel(call: GateCall): string | undefined {
  let body: unknown;
  if (call.body) {
    try {
      body = JSON.parse(call.body.toString('utf8'));
    } catch {
      body = undefined;
    }
  }
  return getProvider(call.provider as ProviderSlug)?.requestModel({ path: call.path, body });
}

/** The 402's message: names the budget's id, scope and window (CONTRACT §6). */
function refusalMessage(b: MatchedBudget, committed: bigint): string {
  const start = new Date(b.windowStart).toISOString();
  const end = new Date(b.windowEnd).toISOString();
  return (
    `budget ${b.id} (scope ${scopeText(b.scope)}, window ${b.window} in ${b.timezone}, ${start} to ${end}) ` +
    `of $${formatUnits(b.amountUnits)} is reached ($${formatUnits(committed)} spent or in flight); its hard cap ` +
    'refuses calls until the next window or a higher amount (meter budgets update)'
  );
}
