import { createAlertDeliverer } from '../alerts/index.js';
import { analyticsComponent } from '../analytics/index.js';
import { createBudgetGate, createBudgetMonitor, createHardCap, createScopedMonitor } from '../budget/index.js';
import type { DaemonContext, StartComponent } from '../component.js';
import { daemonMetering, type MeteringDeps } from '../metering/index.js';
import { otelComponent } from '../otel/index.js';
import { createPlans } from '../plans/index.js';
import { priceTableComponent } from '../pricing/component.js';
import { proxyComponent } from '../proxy/component.js';
import { reconcileJob } from '../reconcile/job.js';
import { aggregateRefresher } from '../store/timescale/refresher.js';

export interface ComposeOptions {
  /** Tuning of the event writer (tests). */
  writer?: MeteringDeps['writer'];
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
  // Plan limits (rate limit, monthly quota) kept fresh in memory, and retention.
  const plans = createPlans(ctx);
  await start(plans.component);
  // Month-to-date spend per budgeted account and the 50/80/100% alerts.
  const budget = await start(createBudgetMonitor(ctx));
  const hardCap = createHardCap(budget, metering);
  // Every budget (any scope, window and zone): spend, alerts, and the block and shadow gate.
  const budgets = await start(createScopedMonitor(ctx));
  const gate = createBudgetGate(ctx, hardCap, budgets, metering);
  await start(await proxyComponent(ctx, { metering: metering.metering, admission: plans.admissions, hardCap: gate }));
  await start(await analyticsComponent(ctx));
  // TimescaleDB mode: the continuous aggregates refreshed every minute and after 00:00 UTC.
  await start(aggregateRefresher(ctx));
  await start(createAlertDeliverer(ctx));
  // Reconciliation against the providers' own reports, daily, when an admin key is set.
  await start(reconcileJob(ctx));
  return { metering, plans, budget, hardCap, budgets, gate };
}

/** The daemon as shipped (meter start). */
export const components = (ctx: DaemonContext, start: StartComponent) => composeDaemon(ctx, start);
