import type { DaemonContext } from '../component.js';
import type { UsageEvent } from '../metering/event.js';
import type { Pricer } from '../pricing/index.js';
import { HardCap } from './hard-cap.js';
import { BudgetMonitor, type BudgetMonitorOptions } from './monitor.js';

export { BudgetMonitor, type BudgetSnapshot } from './monitor.js';
export { HardCap } from './hard-cap.js';

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
