import { Pool } from 'undici';
import type { Config } from '../config.js';
import type { UpstreamTarget } from './targets.js';

/** One keep-alive undici Pool per upstream origin (several slugs may share one). */
export class UpstreamPools {
  private readonly pools = new Map<string, Pool>();

  constructor(targets: Iterable<UpstreamTarget>, config: Pick<Config, 'connectTimeoutMs' | 'idleTimeoutMs'>) {
    for (const t of targets) {
      if (this.pools.has(t.origin)) continue;
      this.pools.set(
        t.origin,
        new Pool(t.origin, {
          connect: { timeout: config.connectTimeoutMs },
          // Silence before the response head and between its chunks: a provider that says
          // nothing for this long is treated as gone (504 before the head, cut after).
          headersTimeout: config.idleTimeoutMs,
          bodyTimeout: config.idleTimeoutMs,
          keepAliveTimeout: 30_000,
          keepAliveMaxTimeout: 600_000,
        }),
      );
    }
  }

  get(origin: string): Pool {
    return this.pools.get(origin)!;
  }

  /** After the daemon drained its calls: close idle sockets, cut anything left. */
  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.close().catch(() => p.destroy())));
  }
}
