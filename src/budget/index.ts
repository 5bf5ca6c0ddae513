import type { DaemonContext } from '../component.js';
import type { ChangeWatcher } from '../pulse/changes.js';
import type { Logger } from '../log.js';
import type { UsageEvent } from '../metering/event.js';
import { toUnits } from '../money.js';
import { BudgetMonitor, type BudgetMonitorOptions } from './monitor.js';
import { ShadowGate } from './gate.js';

export { BudgetMonitor } from './monitor.js';
export { DEFAULT_WORST_OUTPUT_TOKENS, maxOutputTokens, worstCaseUnits } from './worst-case.js';
export { BudgetBook, type MatchedBudget } from './book.js';
export { ShadowGate, refusalMessage } from './gate.js';

/** The monitor re-reads every served account's budgets this often whatever the pulses found. */
const SWEEP_MS = 30_000;

/** Every budget's spend and alerts (monitor.ts): what the pulse says moved, and a sweep of the
 *  accounts the pulse says this sidecar serves. Without a change watcher (tests), every account. */
export function createBudgetMonitor(
  ctx: DaemonContext,
  changes?: ChangeWatcher,
  opts: Partial<BudgetMonitorOptions> = {},
): BudgetMonitor {
  const monitor = new BudgetMonitor(ctx.store, ctx.logger.child({ component: 'budgets' }), {
    sweepMs: SWEEP_MS,
    served: changes && (() => changes.served.list()),
    ...opts,
  });
  changes?.onPulse((p) => monitor.pulse(p));
  // Per budget id only (never a tag value, key or account: CONTRACT §2).
  ctx.metrics.gauge(
    'meter_budget_utilization_ratio',
    "Each budget's spend in its current window over its amount, as last read",
    ['budget_id'],
    (emit) => {
      for (const def of monitor.book.all()) {
        const spend = monitor.states.get(def.id)?.spendUnits;
        if (spend !== undefined)
          emit({ budget_id: def.id }, Number((spend * 1_000_000n) / def.amountUnits) / 1_000_000);
      }
    },
  );
  return monitor;
}

/** Shadow budgets' would-be refusals (gate.ts), settled by the usage events; the refusals of
 *  every budget (block ones are counted by the fleet's admission) for /metrics. */
export function createShadowGate(
  ctx: DaemonContext,
  monitor: BudgetMonitor,
  metering: { observe(listener: (e: UsageEvent) => void): void },
): ShadowGate {
  const gate = new ShadowGate(monitor);
  monitor.attachLedger(gate);
  metering.observe((event) => gate.settle(event));
  ctx.metrics.counter(
    'meter_budget_refusals_total',
    'Calls a budget refused (action block) or would have refused (action shadow), per budget id',
    ['budget_id', 'action'],
    (emit) => {
      for (const [id, r] of gate.refusals) emit({ budget_id: id, action: r.action }, r.count);
    },
  );
  return gate;
}

/**
 * Alerts within a flush interval of this sidecar's own calls (other sidecars' reach the monitor
 * with the pulse): after each batch the writer committed, the monitor hears what this sidecar
 * metered per account since the last batch, and reads again at once the budgets it takes to a
 * level not fired yet; a level fired wakes the alert deliverer at once.
 */
export function alertPromptly(
  metering: { observe(listener: (e: UsageEvent) => void): void; writer: { onWritten(listener: () => void): void } },
  monitor: { nudge(costs: ReadonlyMap<string, bigint>): Promise<unknown>; onFired: (() => void) | undefined },
  deliverer: { wake(): void },
  logger: Pick<Logger, 'warn'>,
): void {
  let costs = new Map<string, bigint>();
  metering.observe((e) => {
    const units = toUnits(e.cost);
    if (units !== 0n) costs.set(e.accountId, (costs.get(e.accountId) ?? 0n) + units);
  });
  metering.writer.onWritten(() => {
    if (costs.size === 0) return;
    const batch = costs;
    costs = new Map();
    monitor.nudge(batch).catch((err: Error) => logger.warn({ err: err.message }, 'budgets: a prompt re-read failed'));
  });
  monitor.onFired = () => deliverer.wake();
}
