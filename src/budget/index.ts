import type { DaemonContext } from '../server/daemon.js';
import { BudgetMonitor, type BudgetMonitorOptions } from './monitor.js';

export { BudgetMonitor, type BudgetSnapshot } from './monitor.js';

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
