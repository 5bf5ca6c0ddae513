import { MeterFailure } from '../errors.js';
import { setTimeout as delay } from 'node:timers/promises';
import { maskUrl } from '../config.js';
import type { Logger } from '../log.js';
import { openStore, UNREACHABLE, type Store, type StoreConfig } from './index.js';

/** The database is not (yet) there: nothing listens, the name does not resolve yet (a
 *  container starting), or the server says it is starting up or shutting down. Wrong
 *  credentials or a missing database are not waited for: they need the operator. */
const NOT_UP = new Set([...UNREACHABLE, '57P03', '08006', '08001']);

export function isDatabaseNotUp(err: unknown): boolean {
  const e = err as { code?: string; message?: string; errors?: unknown[]; cause?: unknown };
  if (e?.code !== undefined && NOT_UP.has(e.code)) return true;
  if (Array.isArray(e?.errors) && e.errors.some(isDatabaseNotUp)) return true; // every address of a host name
  if (/Connection terminated|timeout expired/i.test(e?.message ?? '')) return true;
  return e?.cause !== undefined && e.cause !== err && isDatabaseNotUp(e.cause);
}

export class StartAborted extends MeterFailure {
  override name = 'StartAborted';
  constructor() {
    super('stopped before the daemon started');
  }
}

const FIRST_RETRY_MS = 500;
const MAX_RETRY_MS = 5_000;

/**
 * `meter start`: opens the store (migrations applied), and while a DATABASE_URL database is
 * not up yet, retries with backoff and says so on every attempt, so that the daemon and its
 * database can start in any order (a compose file, a reboot). A signal ends the wait at once.
 */
export async function openStoreWhenUp(
  config: StoreConfig,
  logger: Logger,
  signal?: AbortSignal,
  /** Told why the store is not open yet, for /readyz. */
  onWaiting: (reason: string) => void = () => {},
): Promise<Store> {
  for (let attempt = 1; ; attempt++) {
    if (signal?.aborted) throw new StartAborted();
    try {
      const store = await openStore(config, logger);
      if (attempt > 1) logger.info({ attempts: attempt }, 'database reachable: starting');
      return store;
    } catch (err) {
      if (!config.databaseUrl || !isDatabaseNotUp(err)) throw err;
      const retryInMs = Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** (attempt - 1));
      const cause = err as { code?: string; message?: string; cause?: { code?: string } };
      const why = cause.code ?? cause.cause?.code ?? 'no answer';
      const at = databaseAddress(config.databaseUrl);
      onWaiting(`waiting for the database (${why}), attempt ${attempt}`);
      logger.warn(
        {
          database: maskUrl(config.databaseUrl),
          attempt,
          retry_in_ms: retryInMs,
          err: cause.code ?? cause.cause?.code ?? cause.message,
        },
        attempt === 1
          ? // The first warning says what is going on: a wrong host or port looks like a hang otherwise.
            `database at ${at} not reachable yet (${why}): meter keeps trying for as long as it runs ` +
              `(every ${retryInMs} ms, backing off to every ${MAX_RETRY_MS / 1000} s) and prints "meter listening on …" ` +
              `once it answers; meanwhile /healthz answers 200 and /readyz 503. ` +
              `If ${at} is not where the database is, fix DATABASE_URL; Ctrl-C or SIGTERM stops`
          : `database at ${at} not reachable yet (${why}); retrying in ${retryInMs} ms — meter starts once it answers`,
      );
      await sleep(retryInMs, signal);
    }
  }
}

/** `host:port` of a database URL, without user or password (PostgreSQL's default port when
 *  the URL names none). */
export function databaseAddress(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || '5432'}`;
  } catch {
    return maskUrl(url);
  }
}

/** Resolves after `ms`, or at once when `signal` aborts. */
const sleep = (ms: number, signal?: AbortSignal): Promise<void> => delay(ms, undefined, { signal }).catch(() => {});
