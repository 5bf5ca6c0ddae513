import type { DaemonContext } from '../component.js';
import type { ChangeWatcher } from '../pulse/changes.js';
import { AlertDeliverer, DEFAULT_DELIVERER_OPTIONS, type AlertDelivererOptions } from './deliverer.js';

export { AlertDeliverer, type AlertDelivererOptions } from './deliverer.js';

/** Without a pulse to wake it, the outbox is polled every second; with one, once a minute. */
const PULSED_POLL_MS = 60_000;

/** The daemon component (components.ts): delivers queued budget alerts, woken by the pulse
 *  (pulse/changes.ts) when deliveries are due. */
export function createAlertDeliverer(
  ctx: DaemonContext,
  changes?: ChangeWatcher,
  opts: Partial<AlertDelivererOptions> = {},
): AlertDeliverer {
  const deliverer = new AlertDeliverer(ctx.store, ctx.logger.child({ component: 'alerts' }), {
    ...DEFAULT_DELIVERER_OPTIONS,
    ...(changes && { pollMs: PULSED_POLL_MS }),
    smtpUrl: ctx.config.smtpUrl,
    ...opts,
  });
  changes?.onPulse(async (p) => {
    if (p.alertsDue) deliverer.wake();
  });
  deliverer.registerMetrics(ctx.metrics);
  return deliverer;
}
