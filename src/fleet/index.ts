import type { DaemonContext, Component } from '../component.js';
import type { UsageEvent } from '../metering/event.js';
import { toUnits } from '../money.js';
import type { PlanBook } from '../plans/plans.js';
import type { Pricer } from '../pricing/index.js';
import type { ChangeWatcher } from '../pulse/changes.js';
import { DEFAULT_LEDGER, FleetLedger, type LedgerOptions } from './ledger.js';
import { FleetAdmissions, OverrideBook, type Budgets } from './limits.js';

export { FleetLedger, DEFAULT_LEDGER, type LedgerOptions } from './ledger.js';
export { FleetAdmissions, OverrideBook, type Budgets } from './limits.js';

/**
 * The fleet's limits in the daemon: leases of every limit the sidecar serves, admission of
 * proxied calls against them, settled by the usage events as they are recorded, and every
 * slice given back at stop.
 */
export function createFleet(
  ctx: DaemonContext,
  deps: {
    plans: PlanBook;
    changes: ChangeWatcher;
    budgets: Budgets;
    metering: { pricer: Pricer; observe(listener: (e: UsageEvent) => void): void };
    ledger?: Partial<LedgerOptions>;
  },
) {
  const ledger = new FleetLedger(ctx.store, ctx.logger.child({ component: 'fleet' }), {
    ...DEFAULT_LEDGER,
    ttlMs: ctx.config.fleet.leaseMs,
    syncMs: ctx.config.fleet.syncMs,
    ...deps.ledger,
  });
  const overrides = new OverrideBook();
  deps.changes.watch((db) => overrides.reload(db));
  const admissions = new FleetAdmissions(deps.plans, overrides, ledger, deps.metering.pricer, deps.budgets);
  deps.metering.observe((event) => {
    // A budget settles at the call's cost, tokens a minute at its tokens; the rest (calls) at
    // what they reserved (the common case: nothing is computed for them).
    ledger.settle(
      event.id,
      (spec) =>
        spec.what?.kind === 'budget'
          ? toUnits(event.cost)
          : spec.what?.kind === 'tokens-per-minute'
            ? BigInt(event.inputTokens + event.outputTokens)
            : undefined,
      event.time,
    );
  });
  const m = ctx.metrics;
  m.counter('meter_fleet_lease_statements_total', 'Lease statements run against the database', ['result'], (emit) => {
    emit({ result: 'ok' }, ledger.stats.statements);
    emit({ result: 'failed' }, ledger.stats.failures);
  });
  m.counter('meter_fleet_waits_total', 'Calls that waited for a lease statement before admission', [], (emit) =>
    emit({}, ledger.stats.waits),
  );
  m.gauge('meter_fleet_leases', 'Fleet limits this sidecar holds a lease of', [], (emit) =>
    emit({}, ledger.leases().length),
  );
  const component: Component = {
    name: 'fleet',
    stop: () => ledger.stop(),
  };
  return { ledger, admissions, overrides, component };
}
