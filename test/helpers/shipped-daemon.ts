import pino from 'pino';
import { loadConfig } from '../../src/config.js';
import type { MeteringSetup } from '../../src/metering/index.js';
import { composeDaemon } from '../../src/server/components.js';
import { startDaemon, type Daemon } from '../../src/server/daemon.js';

/**
 * The daemon as shipped (src/server/components.ts), in this process, on a free port, writing
 * events every 20 ms to the given store, with a handle on the metering its proxy uses (tests
 * drain its writer before they read the store). `env`: more METER_* settings.
 */
export async function startShippedDaemon(
  store: { databaseUrl?: string; dataDir: string },
  env: Record<string, string> = {},
): Promise<{ daemon: Daemon; setup: MeteringSetup }> {
  const config = loadConfig({
    METER_PORT: '0',
    METER_HOST: '127.0.0.1',
    METER_DATA_DIR: store.dataDir,
    METER_FLUSH_INTERVAL_MS: '20',
    ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
    ...env,
  });
  let setup: MeteringSetup | undefined;
  const daemon = await startDaemon(config, pino({ level: 'silent' }), async (ctx, start) => {
    setup = (await composeDaemon(ctx, start)).metering;
  });
  if (!setup) throw new Error('the shipped daemon was not composed');
  return { daemon, setup };
}
