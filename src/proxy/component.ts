import { acquireKeyCache, releaseKeyCache } from '../auth/cache.js';
import { parseTags } from '../metering/tags.js';
import type { Metering } from '../metering/types.js';
import type { Component, ComponentFactory, DaemonContext } from '../server/daemon.js';
import { noMetering } from './guarded-meter.js';
import { ProxyMetrics } from './proxy-metrics.js';
import { createProxyHandler, type Admitter, type HardCapAdmitter, type TagParser } from './handler.js';
import { buildTargets } from './targets.js';
import { UpstreamPools } from './upstreams.js';

export interface ProxyOptions {
  /** The metering that watches every authenticated call (default: none, for tests). */
  metering?: Metering | ((ctx: DaemonContext) => Metering | Promise<Metering>);
  /** CONTRACT §2 tagging headers (default: the metering's parser). */
  parseTags?: TagParser;
  /** Pre-flight admission (plans: rate limit and quota; budgets: hard cap), default none. */
  admission?: (ctx: DaemonContext) => Admitter | Promise<Admitter>;
  /** The Pro hard cap (budgets), default none. */
  hardCap?: (ctx: DaemonContext) => HardCapAdmitter;
}

/** `/proxy/{slug}/…`: the daemon's proxy, with its key cache and upstream pools. */
export function proxyComponent(options: ProxyOptions = {}): ComponentFactory {
  return async (ctx): Promise<Component> => {
    const { config, logger, store } = ctx;
    const metering =
      typeof options.metering === 'function' ? await options.metering(ctx) : (options.metering ?? noMetering);
    const admitter = options.admission ? await options.admission(ctx) : undefined;
    const hardCap = options.hardCap?.(ctx);
    const targets = buildTargets(config);
    const auth = await acquireKeyCache(store, { refreshMs: config.keyRefreshMs, logger });
    const pools = new UpstreamPools(targets.values(), config);
    const metrics = new ProxyMetrics(targets.keys());
    metrics.register(ctx.metrics, () => auth.ageSeconds());
    const handler = createProxyHandler({
      targets,
      pools,
      auth,
      metering,
      parseTags: options.parseTags ?? parseTags,
      admitter,
      hardCap,
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
        await releaseKeyCache(store);
      },
    };
  };
}
