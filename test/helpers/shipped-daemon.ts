import pino from 'pino';
import { loadConfig } from '../../src/config.js';
import { meteringComponent, meteringFor, type MeteringSetup } from '../../src/metering/index.js';
import { components } from '../../src/server/components.js';
import { startDaemon, type ComponentFactory, type Daemon } from '../../src/server/daemon.js';

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
  const factories: ComponentFactory[] = components.map((f) =>
    f === meteringComponent ? (ctx) => (setup = meteringFor(ctx)).component : f,
  );
  const daemon = await startDaemon(config, pino({ level: 'silent' }), factories);
  if (!setup) throw new Error('the shipped components no longer include the metering component');
  return { daemon, setup };
}
