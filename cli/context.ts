import { printable } from '../src/printable.js';
import { loadConfig, type Config, type ConfigFlags } from '../src/config.js';
import { localStore, type CliStore } from '../src/admin/client.js';
import { openStore, type StoreConfig } from '../src/store/index.js';
import { StoreLockedError } from '../src/store/lockfile.js';
import { RawNumber, stringifyJson, type JsonValue } from '../src/money.js';
import { MeterError } from '../src/errors.js';

/** How long a command waits for the embedded store another process holds without serving it
 *  (another `meter` command, or a daemon still starting): longer than a daemon's start. */
const LOCK_WAIT_MS = 30_000;

/** Opens the store; while another process holds the embedded store and has no admin API to go
 *  through yet, waits for it instead of failing: two commands run one after the other, and a
 *  command right after `meter start` goes through the daemon once it listens. */
export async function openStoreWaiting(
  config: Pick<Config, 'databaseUrl' | 'dataDir'>,
  waitMs = LOCK_WAIT_MS,
): Promise<CliStore> {
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

/** For CLI commands: like openStore, but when a live daemon holds the embedded store, its
 *  admin API is used instead (that daemon has applied the migrations). */
async function openStoreForCli(config: StoreConfig): Promise<CliStore> {
  try {
    // No daemon holds the store: this command is the only work it does, at full priority.
    return localStore(await openStore({ ...config, embeddedYieldsCpu: false }));
  } catch (err) {
    const owner = err instanceof StoreLockedError ? err.owner : undefined;
    if (owner?.adminToken && (owner.adminSocket || owner.adminUrl)) {
      // Loaded only here: the CLI's way in while a daemon holds the store.
      const { openRemote } = await import('../src/admin/client.js');
      return openRemote({ socket: owner.adminSocket, url: owner.adminUrl, token: owner.adminToken });
    }
    throw err;
  }
}

/** Thrown for a runtime failure the user can act on: one line on stderr, exit 1. */
export class CliError extends MeterError {
  override name = 'CliError';
}

/** Thrown for a bad flag, argument or combination of them: one line on stderr, exit 2. */
export class UsageError extends CliError {
  override name = 'UsageError';
  override readonly exitCode = 2;
}

/** A bad flag value found by a validator is a usage error (exit 2). */
export function asUsage<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/** Runs a command body with the store open, and closes it whatever happens. */
export async function withStore<T>(
  fn: (store: CliStore, config: Readonly<Config>) => Promise<T>,
  flags: ConfigFlags = {},
): Promise<T> {
  const config = loadConfig(process.env, flags);
  const store = await openStoreWaiting(config);
  try {
    return await fn(store, config);
  } finally {
    await store.close();
  }
}

/** Prints data as JSON (`--json`) or as aligned text columns. */
export function printTable<T extends object>(rows: readonly T[], columns: readonly (keyof T & string)[]): void {
  if (rows.length === 0) {
    process.stdout.write('(none)\n');
    return;
  }
  const cell = (v: unknown) =>
    v === null || v === undefined ? '-' : v instanceof Date ? v.toISOString() : printable(String(v));
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd() + '\n';
  process.stdout.write(line(columns.map((c) => c.toUpperCase())));
  for (const r of rows) process.stdout.write(line(columns.map((c) => cell(r[c]))));
}

/** `--json` output: indented for a person at a terminal, one compact line for a pipe. Money
 *  goes in as RawNumber (src/money.ts) so it is written from its exact decimal. */
export function printJson(value: unknown): void {
  process.stdout.write(stringifyJson(toJsonValue(value), process.stdout.isTTY ? 2 : 0) + '\n');
}

/** Plain data to JsonValue the way JSON.stringify sees it (Dates as ISO strings, toJSON honoured). */
function toJsonValue(value: unknown): JsonValue {
  if (value instanceof RawNumber) return value;
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    return toJsonValue((value as { toJSON(): unknown }).toJSON());
  }
  if (Array.isArray(value)) return value.map((v) => (v === undefined ? null : toJsonValue(v)));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, v === undefined ? undefined : toJsonValue(v)]));
  }
  if (typeof value === 'bigint') return new RawNumber(value.toString());
  return value as JsonValue;
}
