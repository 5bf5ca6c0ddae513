import { loadConfig, type Config, type ConfigFlags } from '../src/config.js';
import { openStoreForCli, type Store } from '../src/store/index.js';
import { StoreLockedError } from '../src/store/lockfile.js';

/** How long a command waits for the embedded store another process holds without serving it
 *  (another `meter` command, or a daemon still starting): longer than a daemon's start. */
const LOCK_WAIT_MS = 30_000;

/** Opens the store; while another process holds the embedded store and has no admin API to go
 *  through yet, waits for it instead of failing: two commands run one after the other, and a
 *  command right after `meter start` goes through the daemon once it listens. */
export async function openStoreWaiting(config: Pick<Config, 'databaseUrl' | 'dataDir'>, waitMs = LOCK_WAIT_MS): Promise<Store> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      return await openStoreForCli(config);
    } catch (err) {
      if (!(err instanceof StoreLockedError) || Date.now() >= deadline) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/** Thrown for a user error: printed as one line, no stack trace. */
export class CliError extends Error {
  override name = 'CliError';
}

/** Runs a command body with the store open, and closes it whatever happens. */
export async function withStore<T>(fn: (store: Store, config: Readonly<Config>) => Promise<T>, flags: ConfigFlags = {}): Promise<T> {
  const config = loadConfig(process.env, flags);
  const store = await openStoreWaiting(config);
  try {
    return await fn(store, config);
  } finally {
    await store.close();
  }
}

/** Prints data as JSON (`--json`) or as aligned text columns. */
export function printTable(rows: Record<string, unknown>[], columns: string[]): void {
  if (rows.length === 0) {
    process.stdout.write('(none)\n');
    return;
  }
  const cell = (v: unknown) => (v === null || v === undefined ? '-' : v instanceof Date ? v.toISOString() : String(v));
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd() + '\n';
  process.stdout.write(line(columns.map((c) => c.toUpperCase())));
  for (const r of rows) process.stdout.write(line(columns.map((c) => cell(r[c]))));
}

export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value, null, 2) + '\n');
}
