import { setTimeout as delay } from 'node:timers/promises';
import type { Config } from '../src/config.js';
import { openStore } from '../src/store/index.js';
import { alive, readLock } from '../src/store/lockfile.js';
import { openRemote } from '../src/admin/client.js';
import type { Db } from '../src/store/types.js';
import { checkParams, TOP_STATEMENTS, type TopSource, type TopStatementName } from '../src/top/statements.js';
import { CliError } from './context.js';
import { listBudgets } from '../src/budget/budgets-admin.js';

export function sourceFromDb(db: Pick<Db, 'query' | 'close'>): TopSource {
  return {
    async run<T>(name: TopStatementName, params: unknown[]) {
      const statement = TOP_STATEMENTS[name];
      const problem = checkParams(statement, params);
      if (problem) throw new Error(`${name}: ${problem}`);
      return db.query<T>(statement.sql, params);
    },
    budgets: (account) => listBudgets(db, account),
    close: () => db.close(),
  };
}

/** How long top waits for a daemon that holds the embedded store but does not listen yet. */
const DAEMON_WAIT_MS = 10_000;

const noDaemon = (dataDir: string) =>
  new CliError(
    `no meter daemon is running on the embedded store in ${dataDir}: start one with \`meter start\` ` +
      '(meter top reads the embedded store only through a running daemon), or set DATABASE_URL to read PostgreSQL',
  );

/**
 * PostgreSQL and TimescaleDB: a direct connection (pending migrations applied first, as every
 * command does). The embedded store: only through the daemon that holds it, never the store
 * itself, since `meter start` is refused while another process holds it.
 */
export async function openTopSource(config: Pick<Config, 'databaseUrl' | 'dataDir'>): Promise<TopSource> {
  if (config.databaseUrl) return sourceFromDb(await openStore(config));
  const deadline = Date.now() + DAEMON_WAIT_MS;
  for (;;) {
    const lock = readLock(config.dataDir);
    if (!lock || !alive(lock.pid)) throw noDaemon(config.dataDir);
    if ((lock.adminSocket || lock.adminUrl) && lock.adminToken) {
      const remote = openRemote({ socket: lock.adminSocket, url: lock.adminUrl, token: lock.adminToken });
      if (await remote.ping()) {
        return {
          run: async <T>(name: TopStatementName, params: unknown[]) => (await remote.call(name, { params })) as T[],
          budgets: (account) => remote.call('budgets.list', { account }),
          close: () => remote.close(),
        };
      }
      await remote.close();
      throw noDaemon(config.dataDir);
    }
    // A daemon still starting, or another command holding the store for a moment.
    if (Date.now() >= deadline) throw noDaemon(config.dataDir);
    await delay(200);
  }
}
