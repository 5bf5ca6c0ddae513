import { keyCacheFor, type KeyCache } from '../auth/cache.js';
import { parseTags } from '../metering/tags.js';
import type { Metering } from '../metering/types.js';
import type { Component, DaemonContext } from '../component.js';
import { noMetering } from './guarded-meter.js';
import { ProxyMetrics } from './proxy-metrics.js';
import { createProxyHandler, type Admitter, type TagParser } from './handler.js';
import { buildTargets } from './targets.js';
import { UpstreamPools } from './upstreams.js';

export interface ProxyOptions {
  /** The metering that watches every authenticated call (default: none, for tests). */
  metering?: Metering;
  /** CONTRACT §2 tagging headers (default: the metering's parser). */
  parseTags?: TagParser;
  /** Admission against the fleet's limits (src/fleet: rate limits, quota, hard cap), default none. */
  admission?: Admitter;
  /** The daemon's service keys (default: a key cache of the proxy's own). */
  keys?: KeyCache;
}

/** `/proxy/{slug}/…`: the daemon's proxy, with its key cache and upstream pools. */
export async function proxyComponent(ctx: DaemonContext, options: ProxyOptions = {}): Promise<Component> {
  const { config, logger, store } = ctx;
  const targets = buildTargets(config);
  const keys = await keyCacheFor(store, { refreshMs: config.keyRefreshMs, logger }, options.keys);
  const auth = keys.cache;
  const pools = new UpstreamPools(targets.values(), config);
  const metrics = new ProxyMetrics(targets.keys());
  metrics.register(ctx.metrics, () => auth.ageSeconds());
  const handler = createProxyHandler({
    targets,
    pools,
    auth,
    metering: options.metering ?? noMetering,
    parseTags: options.parseTags ?? parseTags,
    admitter: options.admission,
    idleTimeoutMs: config.idleTimeoutMs,
    limits: config.limits,
    logger,
    metrics,
  });
  return {
    name: 'proxy',
    routes: { '/proxy/': handler },
    async stop() {
      await pools.close();
      await keys.release();
    },
  };
}
