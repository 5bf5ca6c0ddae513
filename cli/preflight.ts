import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { unknownVariables, type Config } from '../src/config.js';
import type { Logger } from '../src/log.js';
import { prepareDataDir } from '../src/store/data-dir.js';
import { CliError } from './context.js';

/**
 * What `meter start` checks before it opens the store (a new embedded store takes seconds,
 * and a busy port should not be found only after that): the port is free, unknown METER_*
 * variables are named, and a first start says what it is doing.
 */
export async function preflight(
  config: Readonly<Config>,
  logger: Logger,
  portFrom: string,
  dataDirFrom: string,
): Promise<void> {
  for (const { name, suggestion } of unknownVariables()) {
    logger.warn(
      { variable: name, suggestion },
      `${name} is not a meter setting and is ignored (did you mean ${suggestion}?)`,
    );
  }
  const overridden = Object.entries(config.upstreams);
  if (overridden.length > 0) {
    logger.info(
      { upstreams: config.upstreams },
      `upstreams overridden: ${overridden.map(([slug, url]) => `${slug} → ${url}`).join(', ')} (the others: the providers' public addresses)`,
    );
  }
  if (config.port !== 0) await checkPortFree(config.host, config.port, portFrom);
  // The spool lives there whatever the store: a bad directory is named now, not after a
  // log line that says the store is being created.
  prepareDataDir(config.dataDir, dataDirFrom);
  if (!config.databaseUrl && !existsSync(join(config.dataDir, 'pgdata'))) {
    logger.info({ dataDir: config.dataDir }, 'creating the embedded store (first start only; takes a few seconds)');
  }
}

function checkPortFree(host: string, port: number, portFrom: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => {
      const why =
        err.code === 'EADDRINUSE'
          ? 'is already in use (another meter?)'
          : err.code === 'EACCES'
            ? 'needs privileges this user lacks'
            : `cannot be listened on (${err.code ?? err.message})`;
      reject(new CliError(`port ${port} on ${host} (${portFrom}) ${why}: choose another with --port or METER_PORT`));
    });
    probe.listen(port, host, () => probe.close(() => resolve()));
  });
}
