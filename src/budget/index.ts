import type { DaemonContext } from '../component.js';
import { BudgetMonitor, type BudgetMonitorOptions } from './monitor.js';

export { BudgetMonitor, type BudgetSnapshot } from './monitor.js';
export { DEFAULT_WORST_OUTPUT_TOKENS, maxOutputTokens, worstCaseUnits } from './worst-case.js';

/** The daemon component (components.ts). Spend is re-read every flush interval. */
export function createBudgetMonitor(ctx: DaemonContext, opts: Partial<BudgetMonitorOptions> = {}): BudgetMonitor {
  return new BudgetMonitor(ctx.store, ctx.logger.child({ component: 'budget' }), {
    intervalMs: ctx.config.flushIntervalMs,
    ...opts,
  });
}
