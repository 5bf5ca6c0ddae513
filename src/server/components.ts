import { createAlertDeliverer } from '../alerts/index.js';
import { KeyCache } from '../auth/cache.js';
import { analyticsComponent } from '../analytics/index.js';
import { alertPromptly, createBudgetMonitor, createShadowGate } from '../budget/index.js';
import type { DaemonContext, StartComponent } from '../component.js';
import { createFleet, type LedgerOptions } from '../fleet/index.js';
import { ChangeWatcher } from '../pulse/changes.js';
import { daemonMetering, type MeteringDeps } from '../metering/index.js';
import { otelComponent } from '../otel/index.js';
import { createPlans } from '../plans/index.js';
import { priceTableComponent } from '../pricing/component.js';
import { proxyComponent } from '../proxy/component.js';
import { reconcileJob } from '../reconcile/job.js';
import { billingComponent } from '../billing/sender.js';
import { aggregateRefresher } from '../store/timescale/refresher.js';
import { uiComponent } from '../ui/component.js';

export interface ComposeOptions {
  /** Tuning of the event writer (tests). */
  writer?: MeteringDeps['writer'];
  /** Timing of the fleet's leases (tests). */
  ledger?: Partial<LedgerOptions>;
}

/**
 * The composition root: every feature of the daemon, built and started in this order (stopped
 * in reverse). What one part needs of another is passed as an argument, so the order is this
 * function's and the compiler checks it. Returns the parts tests reach into.
 */
export async function composeDaemon(ctx: DaemonContext, start: StartComponent, opts: ComposeOptions = {}) {
  // The price table in force (the saved copy, METER_PRICES_REMOTE) before the first call is priced.
  await start(priceTableComponent(ctx));
  // The event writer starts first and stops last: every drained call's event is written before exit.
  const metering = daemonMetering(ctx, opts.writer);
  await start(metering.component);
  // OpenTelemetry export, only when an OTLP endpoint is set (its SDK is not even loaded otherwise).
  await start(await otelComponent(ctx, metering.metering));
  // The pulse: plans, budgets, limit overrides and keys are re-read when the fleet's change
  // counter moves; budgets' spend when served accounts had events written; alerts when due.
  const changes = new ChangeWatcher(ctx.store, ctx.logger.child({ component: 'changes' }), ctx.config.keyRefreshMs);
  const plans = createPlans(ctx, changes);
  await start(plans.component);
  // The accounts this sidecar serves: the pulse probes only theirs for new events.
  metering.observe((event) => changes.served.touch(event.accountId));
  // Every budget (any scope, window and zone; the account budget is one): spend and alerts;
  // shadow budgets' would-be refusals.
  const budgets = await start(createBudgetMonitor(ctx, changes));
  const shadows = createShadowGate(ctx, budgets, metering);
  // The fleet's limits (rate limits, quota, block budgets) as leases; it stops after the proxy,
  // so every slice goes back once the calls in flight have ended.
  const fleet = createFleet(ctx, {
    plans: plans.book,
    changes,
    budgets: { book: budgets.book, shadows },
    metering,
    ledger: opts.ledger,
  });
  // Service keys, one cache for the proxy and analytics, re-read when the change counter moved
  // instead of on a timer of their own.
  const keys = new KeyCache(ctx.store, { refreshMs: ctx.config.keyRefreshMs, logger: ctx.logger });
  await keys.start();
  keys.followChanges();
  changes.watch(
    () => keys.reread(),
    () => keys.confirm(),
  );
  await start({ name: 'keys', stop: () => keys.stop() });
  await start(changes);
  await start(fleet.component);
  await start(await proxyComponent(ctx, { metering: metering.metering, admission: fleet.admissions, keys }));
  await start(await analyticsComponent(ctx, { keys }));
  // The spend page at /ui: static files that read the analytics API with the user's key.
  await start(uiComponent(ctx));
  // TimescaleDB mode: the continuous aggregates refreshed every minute and after 00:00 UTC.
  await start(aggregateRefresher(ctx));
  const deliverer = await start(createAlertDeliverer(ctx, changes));
  // Levels crossed by this sidecar's own calls fire as soon as their events are written.
  alertPromptly(metering, budgets, deliverer, ctx.logger);
  // Reconciliation against the providers' own reports, daily, when an admin key is set.
  await start(reconcileJob(ctx));
  // Customer billing: what is due derived from stored usage and sent to Stripe or CloudEvents.
  await start(billingComponent(ctx));
  return { metering, plans, budgets, shadows, fleet };
}

/** The daemon as shipped (meter start). */
export const components = (ctx: DaemonContext, start: StartComponent) => composeDaemon(ctx, start);
