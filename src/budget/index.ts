import type { DaemonContext } from '../component.js';
import type { UsageEvent } from '../metering/event.js';
import type { Pricer } from '../pricing/index.js';
import { HardCap } from './hard-cap.js';
import { BudgetMonitor, type BudgetMonitorOptions } from './monitor.js';
import { BudgetGate } from './gate.js';
import { ScopedBudgetMonitor, type ScopedMonitorOptions } from './scoped-monitor.js';

export { BudgetMonitor, type BudgetSnapshot } from './monitor.js';
export { HardCap } from './hard-cap.js';
export { BudgetBook, type MatchedBudget } from './book.js';
export { BudgetGate } from './gate.js';
export { ScopedBudgetMonitor } from './scoped-monitor.js';

/** The daemon component (components.ts). Spend is re-read every flush interval. */
export function createBudgetMonitor(ctx: DaemonContext, opts: Partial<BudgetMonitorOptions> = {}): BudgetMonitor {
  return new BudgetMonitor(ctx.store, ctx.logger.child({ component: 'budget' }), {
    intervalMs: ctx.config.flushIntervalMs,
    ...opts,
  });
}

/** The hard cap, fed by the budget monitor and settled by the usage events. */
export function createHardCap(
  monitor: BudgetMonitor,
  metering: { pricer: Pricer; observe(listener: (e: UsageEvent) => void): void },
): HardCap {
  // An ended call's cost is counted here until a spend re-read shows its event.
  const cap = new HardCap(monitor, metering.pricer);
  monitor.attachLedger(cap);
  metering.observe((event) => cap.settle(event));
  return cap;
}

/** Every budget's spend and alerts (scoped-monitor.ts): meter_changes and the recent writes
 *  polled once a second, every budget re-read every 30 s. */
export function createScopedMonitor(ctx: DaemonContext, opts: Partial<ScopedMonitorOptions> = {}): ScopedBudgetMonitor {
  const monitor = new ScopedBudgetMonitor(ctx.store, ctx.logger.child({ component: 'budgets' }), {
    pollMs: 1_000,
    sweepMs: 30_000,
    ...opts,
  });
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

/** The proxy's admission gate: the account budget's hard cap, then every block and shadow budget. */
export function createBudgetGate(
  ctx: DaemonContext,
  cap: HardCap,
  monitor: ScopedBudgetMonitor,
  metering: { observe(listener: (e: UsageEvent) => void): void },
): BudgetGate {
  const gate = new BudgetGate(cap, monitor);
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
