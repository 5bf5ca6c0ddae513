/**
 * Shadow budgets (CONTRACT §6): the call goes through, and the refusal a `block` budget in its
 * place would have met is counted (/metrics), flagged on its event and shown in analytics. Per
 * sidecar and in memory, so a shadow budget never delays a call: the spend the monitor last read
 * (≤ 1 s old for an account with recent writes) plus the worst case of this sidecar's calls in
 * flight under the budget plus the real cost of its ended calls that read does not show yet.
 * `block` budgets are the fleet's leases (src/fleet/limits.ts); their refusals are counted here.
 */
import type { UsageEvent } from '../metering/event.js';
import { formatUnits, toUnits } from '../money.js';
import type { MatchedBudget } from './book.js';
import { scopeText } from './scope.js';
import type { WorstCost } from './worst-case.js';
import type { BudgetMonitor } from './monitor.js';

interface Held {
  budgets: string[];
  units: bigint;
}

export class ShadowGate {
  /** Refusals per budget id (block: refused; shadow: would have been), for /metrics. */
  readonly refusals = new Map<string, { action: 'block' | 'shadow'; count: number }>();
  readonly #inFlight = new Map<string, Held>();
  /** Per budget: worst cases in flight plus real costs not yet seen by the monitor (units). */
  readonly #pending = new Map<string, bigint>();
  /** Per budget: ended calls whose cost the monitor's last read did not show. */
  readonly #unseen = new Map<string, Map<string, { time: string; units: bigint }>>();

  constructor(private readonly monitor: BudgetMonitor) {}

  /**
   * The shadow budgets among `budgets` that would refuse the call as a block budget of the same
   * amount would: nothing left of what they count (spend and calls in flight), or, strict, less
   * left than its worst case (`undefined`: unknown, the whole amount); a model without a price,
   * always. The call's worst case is then held under each shadow budget until its event says
   * what it cost.
   */
  check(callId: string, budgets: MatchedBudget[], worst: WorstCost, now: number): string[] {
    const shadows = budgets.filter((b) => b.action === 'shadow');
    if (shadows.length === 0) return [];
    const wouldBlock: string[] = [];
    const units = typeof worst === 'bigint' ? worst : 0n;
    for (const b of shadows) {
      const committed = (this.monitor.spendOf(b.id, now) ?? 0n) + (this.#pending.get(b.id) ?? 0n);
      const fits = b.strict
        ? committed + (worst === undefined ? b.amountUnits : units) <= b.amountUnits
        : committed < b.amountUnits;
      if (worst === 'unpriced' || !fits) {
        wouldBlock.push(b.id);
        this.count(b.id, 'shadow');
      }
    }
    const ids = shadows.map((b) => b.id);
    this.#inFlight.set(callId, { budgets: ids, units });
    this.#add(ids, units);
    return wouldBlock;
  }

  count(id: string, action: 'block' | 'shadow'): void {
    const r = this.refusals.get(id);
    if (r) r.count++;
    else this.refusals.set(id, { action, count: 1 });
  }

  /** Frees a reservation whose call will make no event. */
  release(id: string): void {
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
}

/** The 402's message: names the budget's id, scope and window (CONTRACT §6); a strict budget
 *  with room left, but less than the call's worst case, says both and that a lower max_tokens fits. */
export function refusalMessage(b: MatchedBudget, committed: bigint, worst?: bigint, account?: string): string {
  const start = new Date(b.windowStart).toISOString();
  const end = new Date(b.windowEnd).toISOString();
  const what = `budget ${b.id} (scope ${scopeText(b.scope)}, window ${b.window} in ${b.timezone}, ${start} to ${end})`;
  const room = b.amountUnits - committed;
  if (b.strict && worst !== undefined && room > 0n && worst > room) {
    return (
      `the strict ${what} of $${formatUnits(b.amountUnits)} has $${formatUnits(room)} left, less than this call's ` +
      `worst case of $${formatUnits(worst)} (its input and its whole output limit at the model's price); ` +
      'a lower max_tokens would fit, or raise the amount (meter budgets update)'
    );
  }
  const whose = account
    ? `the monthly budget of $${formatUnits(b.amountUnits)} for account ${account} is reached: `
    : '';
  return (
    `${whose}${what} of $${formatUnits(b.amountUnits)} is reached ($${formatUnits(committed)} spent or in flight); ` +
    'its hard cap refuses calls until the next window or a higher amount (meter budgets update)'
  );
}
