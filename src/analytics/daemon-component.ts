import { keyCacheFor, type KeyCache } from '../auth/cache.js';
import type { Component, DaemonContext } from '../component.js';
import { createReadBudget, readShare } from '../store/read-budget.js';
import { createAnalytics } from './component.js';

/** `/analytics/…` in the daemon: authenticates with the daemon's key cache (`keys`, the one
 *  the proxy uses; default: one of its own); its reads hold at most half the store's
 *  connections, so the proxy's always find one. */
export async function analyticsComponent(
  { config, logger, store }: DaemonContext,
  options: { keys?: KeyCache } = {},
): Promise<Component> {
  const keys = await keyCacheFor(store, { refreshMs: config.keyRefreshMs, logger }, options.keys);
  const component = createAnalytics({
    store,
    authenticator: keys.cache,
    retentionVisibility: store.kind === 'timescale',
    logger,
    reads: createReadBudget(store, readShare(config.dbPoolMax)),
  });
  return { ...component, stop: () => keys.release() };
}
