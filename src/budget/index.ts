import type { DaemonContext } from '../server/daemon.js';
import type { UsageEvent } from '../metering/event.js';
import type { Pricer } from '../pricing/index.js';
import { HardCap } from './hard-cap.js';
import { BudgetMonitor, type BudgetMonitorOptions } from './monitor.js';

export { BudgetMonitor, type BudgetSnapshot } from './monitor.js';
export { HardCap } from './hard-cap.js';

const monitors = new WeakMap<DaemonContext, BudgetMonitor>();

/** The daemon component (components.ts). Spend is re-read every flush interval. */
export function createBudgetMonitor(ctx: DaemonContext, opts: Partial<BudgetMonitorOptions> = {}): BudgetMonitor {
  const monitor = new BudgetMonitor(ctx.store, ctx.logger.child({ component: 'budget' }), {
    intervalMs: ctx.config.flushIntervalMs,
    ...opts,
  });
  monitors.set(ctx, monitor);
  return monitor;
}

/** The budget monitor of this daemon, for components started after it (the hard cap):
 *  `budgetMonitorOf(ctx)?.budgetOf(accountId)`. */
export function budgetMonitorOf(ctx: DaemonContext): BudgetMonitor | undefined {
  return monitors.get(ctx);
}

/** The hard cap of a daemon, fed by its budget monitor and settled by its usage events. */
export function hardCapFor(
  ctx: DaemonContext,
  metering: { pricer: Pricer; observe(listener: (e: UsageEvent) => void): void },
): HardCap {
  const monitor = budgetMonitorOf(ctx);
  if (!monitor) throw new Error('the budget monitor must be registered before the hard cap');
  // An ended call's cost is counted here until a spend re-read shows its event.
  const cap = new HardCap(monitor, metering.pricer);
  monitor.attachLedger(cap);
  metering.observe((event) => cap.settle(event));
  return cap;
}
