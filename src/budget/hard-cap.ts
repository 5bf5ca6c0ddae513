import type { UsageEvent } from '../metering/event.js';
import type { Pricer } from '../pricing/index.js';
import { formatUnits, toUnits } from '../money.js';
import type { BudgetSnapshot, SpendLedger } from './monitor.js';
import { worstCaseUnits, type PricedCall } from './worst-case.js';

export { DEFAULT_WORST_OUTPUT_TOKENS, maxOutputTokens } from './worst-case.js';

export interface HardCapCall extends PricedCall {
  id: string;
  accountId: string;
}

export type HardCapDecision = { ok: true; reservedUnits: bigint } | { ok: false; message: string };

interface AccountLedger {
  /** Worst-case cost of this sidecar's calls in flight, by event id (units of 1e-8 USD). */
  inFlight: Map<string, bigint>;
  inFlightUnits: bigint;
  /** Real costs of calls that ended here and that no spend re-read has shown yet, by event id. */
  unseen: Map<string, { units: bigint; month: string; time: string }>;
  /** Their sum per month ("YYYY-MM" of the event's time): only the budget's month counts. */
  unseenUnits: Map<string, bigint>;
}

/**
 * The Pro hard cap (CONTRACT §6): a call is admitted while the month's fleet-wide spend plus this
 * sidecar's costs that spend does not show yet plus the worst case of its calls in flight is
 * below the budget; its own worst case (max_tokens, else the model's window, and the input size)
 * is then reserved until its usage event says what it really cost. All in memory: no I/O on the
 * hot path.
 *
 * The ledger's invariant — every cost counted exactly once: a call's cost is in `inFlight` from
 * admission until its event is recorded, then in `unseen` until a spend re-read whose snapshot
 * contains its event (the re-read asks, in the same snapshot, which of the unseen events it
 * holds: see BudgetMonitor), and from then on only in the re-read spend. The snapshot and the
 * events it holds are applied in one step, so `admit` never sees a cost in both or in neither.
 */
export class HardCap implements SpendLedger {
  readonly #ledgers = new Map<string, AccountLedger>();

  constructor(
    private readonly budgets: { budgetOf(accountId: string): BudgetSnapshot | undefined },
    private readonly pricer: Pricer,
  ) {}

  /** true when the account's calls need admission (a budget with a hard cap on a plan that has one). */
  applies(accountId: string): boolean {
    return this.budgets.budgetOf(accountId)?.hardCap === true;
  }

  admit(call: HardCapCall): HardCapDecision {
    const budget = this.budgets.budgetOf(call.accountId);
    if (!budget?.hardCap) return { ok: true, reservedUnits: 0n };
    const ledger = this.#ledger(call.accountId);
    const committed = budget.spendUnits + this.pendingUnits(call.accountId, budget.month);
    if (committed >= budget.budgetUnits) {
      return {
        ok: false,
        message:
          `the monthly budget of $${budget.budget} for account ${budget.account} is reached ` +
          `($${formatUnits(budget.spendUnits)} spent in ${budget.month}, plus calls in flight); the hard cap ` +
          'refuses calls until the next month or a higher budget (meter budget set)',
      };
    }
    // A call whose model cannot be known (a huge body) may cost anything: it holds what is left.
    const worst = this.worstCase(call) ?? budget.budgetUnits - committed;
    ledger.inFlight.set(call.id, worst);
    ledger.inFlightUnits += worst;
    return { ok: true, reservedUnits: worst };
  }

  /** A usage event was recorded: its call is no longer in flight; its real cost counts here
   *  until a spend re-read shows it. */
  settle(event: Pick<UsageEvent, 'id' | 'accountId' | 'cost' | 'time'>): void {
    const ledger = this.#ledgers.get(event.accountId);
    const reserved = ledger?.inFlight.get(event.id);
    if (!ledger || reserved === undefined) return;
    ledger.inFlight.delete(event.id);
    ledger.inFlightUnits -= reserved;
    const units = toUnits(event.cost);
    if (units === 0n) return; // nothing to count, nothing to confirm
    const month = event.time.slice(0, 7);
    ledger.unseen.set(event.id, { units, month, time: event.time });
    ledger.unseenUnits.set(month, (ledger.unseenUnits.get(month) ?? 0n) + units);
  }

  /** Releases a reservation whose call never produced an event (refused or failed before forwarding). */
  release(accountId: string, id: string): void {
    const ledger = this.#ledgers.get(accountId);
    const reserved = ledger?.inFlight.get(id);
    if (!ledger || reserved === undefined) return;
    ledger.inFlight.delete(id);
    ledger.inFlightUnits -= reserved;
  }

  /** What this sidecar adds to the account's re-read spend of `month`: its costs the re-read
   *  does not show yet, and the worst case of its calls in flight. */
  pendingUnits(accountId: string, month: string): bigint {
    const ledger = this.#ledgers.get(accountId);
    if (!ledger) return 0n;
    return (ledger.unseenUnits.get(month) ?? 0n) + ledger.inFlightUnits;
  }

  /** SpendLedger: the events whose cost is counted here, for the re-read to look up. */
  unseenEvents(): { id: string; time: string }[] {
    const out: { id: string; time: string }[] = [];
    for (const ledger of this.#ledgers.values()) for (const [id, e] of ledger.unseen) out.push({ id, time: e.time });
    return out;
  }

  /** SpendLedger: anything in flight or unseen on any account. */
  active(): boolean {
    return this.#ledgers.size > 0;
  }

  /** SpendLedger: the re-read spend now in force holds these events: stop counting them here.
   *  Costs of months before `month` are dropped too (that spend no longer counts). */
  seen(ids: Iterable<string>, month: string): void {
    const drop = (ledger: AccountLedger, id: string) => {
      const e = ledger.unseen.get(id);
      if (!e) return;
      ledger.unseen.delete(id);
      const left = (ledger.unseenUnits.get(e.month) ?? 0n) - e.units;
      if (left === 0n) ledger.unseenUnits.delete(e.month);
      else ledger.unseenUnits.set(e.month, left);
    };
    const wanted = new Set(ids);
    for (const [accountId, ledger] of this.#ledgers) {
      for (const [id, e] of ledger.unseen) if (wanted.has(id) || e.month < month) drop(ledger, id);
      if (ledger.unseen.size === 0 && ledger.inFlight.size === 0) this.#ledgers.delete(accountId);
    }
  }

  /** The most a call can cost (units of 1e-8 USD); undefined when its model cannot be known. */
  worstCase(call: HardCapCall): bigint | undefined {
    return worstCaseUnits(this.pricer, call);
  }

  #ledger(accountId: string): AccountLedger {
    let l = this.#ledgers.get(accountId);
    if (!l)
      this.#ledgers.set(
        accountId,
        (l = { inFlight: new Map(), inFlightUnits: 0n, unseen: new Map(), unseenUnits: new Map() }),
      );
    return l;
  }
}
