import { acquireKeyCache, releaseKeyCache } from '../auth/cache.js';
import type { Component, DaemonContext } from '../component.js';
import { createReadBudget, readShare } from '../store/read-budget.js';
import { createAnalytics } from './component.js';

/** `/analytics/…` in the daemon: authenticates with the key cache it shares with the proxy; its
 *  reads hold at most half the store's connections, so the proxy's always find one. */
export async function analyticsComponent({ config, logger, store }: DaemonContext): Promise<Component> {
  const authenticator = await acquireKeyCache(store, { refreshMs: config.keyRefreshMs, logger });
  const component = createAnalytics({
    store,
    authenticator,
    retentionVisibility: store.kind === 'timescale',
    logger,
    reads: createReadBudget(store, readShare(config.dbPoolMax)),
  });
  return { ...component, stop: () => releaseKeyCache(store) };
}
