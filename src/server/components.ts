import { createAlertDeliverer } from '../alerts/index.js';
import { analyticsComponent } from '../analytics/index.js';
import { createBudgetMonitor, hardCapFor } from '../budget/index.js';
import { meteringComponent, meteringFor } from '../metering/index.js';
import { otelComponent } from '../otel/index.js';
import { plansFor } from '../plans/index.js';
import { priceTableComponent } from '../pricing/component.js';
import { proxyComponent } from '../proxy/component.js';
import { reconcileJob } from '../reconcile/job.js';
import { aggregateRefresher } from '../store/timescale/refresher.js';
import type { ComponentFactory } from './daemon.js';

/** Every feature of the daemon, in start order (stopped in reverse). */
export const components: ComponentFactory[] = [
  // The price table in force (the saved copy, METER_PRICES_REMOTE) before the first call is priced.
  priceTableComponent,
  // The event writer starts first and stops last: every drained call's event is written before exit.
  meteringComponent,
  // OpenTelemetry export, only when an OTLP endpoint is set (its SDK is not even loaded otherwise).
  otelComponent,
  // Plan limits (rate limit, monthly quota) kept fresh in memory, and retention.
  (ctx) => plansFor(ctx).component,
  // Month-to-date spend per budgeted account and the 50/80/100% alerts.
  (ctx) => createBudgetMonitor(ctx),
  proxyComponent({
    metering: (ctx) => meteringFor(ctx).metering,
    admission: (ctx) => plansFor(ctx).admissions,
    hardCap: (ctx) => hardCapFor(ctx, meteringFor(ctx)),
  }),
  analyticsComponent,
  // TimescaleDB mode: the continuous aggregates refreshed every minute and after 00:00 UTC.
  ({ store, logger }) => aggregateRefresher({ store, logger }),
  (ctx) => createAlertDeliverer(ctx),
  // Reconciliation against the providers' own reports, daily, when an admin key is set.
  (ctx) => reconcileJob(ctx),
];
