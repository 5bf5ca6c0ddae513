import { acquireKeyCache, releaseKeyCache } from '../auth/cache.js';
import type { Component, DaemonContext } from '../component.js';
import { createAnalytics } from './component.js';

/** `/analytics/…` in the daemon: authenticates with the key cache it shares with the proxy. */
export async function analyticsComponent({ config, logger, store }: DaemonContext): Promise<Component> {
  const authenticator = await acquireKeyCache(store, { refreshMs: config.keyRefreshMs, logger });
  const component = createAnalytics({
    store,
    authenticator,
    retentionVisibility: store.kind === 'timescale',
    logger,
  });
  return { ...component, stop: () => releaseKeyCache(store) };
}
