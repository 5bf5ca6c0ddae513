import type { Command } from 'commander';
import { loadConfig, type ConfigFlags } from '../../src/config.js';
import { createLogger, type Logger } from '../../src/log.js';
import type { Daemon } from '../../src/server/daemon.js';
import { StartAborted } from '../../src/store/wait.js';
import { preflight } from '../preflight.js';

export function registerStart(program: Command): void {
  program
    .command('start')
    .description('run the sidecar daemon in the foreground (applies migrations first)')
    .option('--host <host>', 'address to listen on (METER_HOST)')
    .option('--port <port>', 'port to listen on, 0 picks a free one (METER_PORT)')
    .option('--data-dir <dir>', 'embedded store, lock file and spool (METER_DATA_DIR)')
    .option('--database-url <url>', 'PostgreSQL or TimescaleDB (DATABASE_URL)')
    .action(async (opts: { host?: string; port?: string; dataDir?: string; databaseUrl?: string }) => {
      const flags: ConfigFlags = {
        METER_HOST: opts.host,
        METER_PORT: opts.port,
        METER_DATA_DIR: opts.dataDir,
        DATABASE_URL: opts.databaseUrl,
      };
      const config = loadConfig(process.env, flags);
      const logger = createLogger(config.logLevel);
      // Signals are handled from the first moment (as PID 1 in a container, a signal without a
      // handler is ignored): a stop while waiting for the database or migrating ends the start.
      const stopRequested = onFirstStopSignal(logger);
      const abort = new AbortController();
      void stopRequested.then(() => abort.abort());
      await preflight(
        config,
        logger,
        opts.port ? '--port' : process.env.METER_PORT ? 'METER_PORT' : 'the default port',
        opts.dataDir ? '--data-dir' : process.env.METER_DATA_DIR ? 'METER_DATA_DIR' : 'the default',
      );
      // The daemon's code (every provider, the stores, OpenTelemetry, billing's SDK) is loaded by
      // `meter start` only: every other command starts in a fraction of the time.
      const [{ startDaemon }, { components }] = await Promise.all([
        import('../../src/server/daemon.js'),
        import('../../src/server/components.js'),
      ]);
      let daemon: Daemon;
      try {
        daemon = await startDaemon(config, logger, components, { signal: abort.signal });
      } catch (err) {
        if (!(err instanceof StartAborted)) throw err;
        logger.info('stopped before the daemon started');
        logger.flush();
        return;
      }
      process.stdout.write(`meter listening on ${daemon.url}\n`);
      logger.info({ url: daemon.url, store: daemon.store.kind }, 'meter started');

      const signal = await stopRequested;
      logger.info({ signal }, 'draining in-flight calls and queued events (a second signal exits at once)');
      try {
        await daemon.close();
      } catch (err) {
        logger.error({ err }, 'shutdown failed');
        process.exitCode = 1;
      }
      logger.info('meter stopped');
      logger.flush();
    });
}

/** Within this long, the same signal again is the same request to stop: Ctrl-C under `npm start`
 *  reaches the daemon from the terminal and again from npm, which forwards its own copy. */
export const REPEATED_SIGNAL_MS = 1_000;

/** Resolves with the first SIGINT or SIGTERM. A later second one (either) means "now": exit 1. */
function onFirstStopSignal(logger: Logger): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let first: { signal: NodeJS.Signals; at: number } | undefined;
    const handler = (signal: NodeJS.Signals) => {
      const now = performance.now();
      if (!first) {
        first = { signal, at: now };
        return resolve(signal);
      }
      if (signal === first.signal && now - first.at < REPEATED_SIGNAL_MS) return; // the same request
      logger.warn({ signal }, 'second signal: exiting without finishing the drain');
      logger.flush();
      process.exit(1);
    };
    process.on('SIGINT', handler);
    process.on('SIGTERM', handler);
  });
}
