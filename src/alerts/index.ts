import type { DaemonContext } from '../component.js';
import { AlertDeliverer, DEFAULT_DELIVERER_OPTIONS, type AlertDelivererOptions } from './deliverer.js';

export { AlertDeliverer, type AlertDelivererOptions } from './deliverer.js';

/** The daemon component (components.ts): delivers queued budget alerts. */
export function createAlertDeliverer(ctx: DaemonContext, opts: Partial<AlertDelivererOptions> = {}): AlertDeliverer {
  const deliverer = new AlertDeliverer(ctx.store, ctx.logger.child({ component: 'alerts' }), {
    ...DEFAULT_DELIVERER_OPTIONS,
    smtpUrl: ctx.config.smtpUrl,
    ...opts,
  });
  deliverer.registerMetrics(ctx.metrics);
  return deliverer;
}
