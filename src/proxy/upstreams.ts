import { createRequire } from 'node:module';
import type { Pool as UndiciPool } from 'undici';
import type { Config } from '../config.js';
import type { UpstreamTarget } from './targets.js';

/** undici's Pool alone: its package index loads every other part of undici too (fetch,
 *  WebSocket, caches, mocks), about 8 MB and a quarter second of start-up the proxy never uses.
 *  The version is pinned, and the Pool it loads is the one the index exports. */
const Pool = createRequire(import.meta.url)('undici/lib/dispatcher/pool.js') as typeof UndiciPool;
type Pool = UndiciPool;

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
