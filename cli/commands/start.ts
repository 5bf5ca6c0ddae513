import type { Command } from 'commander';
import { loadConfig, type ConfigFlags } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { components } from '../../src/server/components.js';
import { startDaemon } from '../../src/server/daemon.js';
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
      await preflight(config, logger, opts.port ? '--port' : process.env.METER_PORT ? 'METER_PORT' : 'the default port');
      const daemon = await startDaemon(config, logger, components);
      process.stdout.write(`meter listening on ${daemon.url}\n`);
      logger.info({ url: daemon.url, store: daemon.store.kind }, 'meter started');

      await new Promise<void>((resolve) => {
        const stop = (signal: NodeJS.Signals) => {
          logger.info({ signal }, 'draining in-flight calls and queued events');
          // A second signal while draining means "now".
          process.once(signal, () => process.exit(1));
          daemon.close().then(resolve, (err: Error) => {
            logger.error({ err: { message: err.message } }, 'shutdown failed');
            process.exitCode = 1;
            resolve();
          });
        };
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
      });
      logger.info('meter stopped');
      logger.flush();
    });
}
