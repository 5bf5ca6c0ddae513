import { loadConfig, type Config, type ConfigFlags } from '../src/config.js';
import { openStoreForCli, type Store } from '../src/store/index.js';

/** Thrown for a user error: printed as one line, no stack trace. */
export class CliError extends Error {
  override name = 'CliError';
}

/** Runs a command body with the store open, and closes it whatever happens. */
export async function withStore<T>(fn: (store: Store, config: Readonly<Config>) => Promise<T>, flags: ConfigFlags = {}): Promise<T> {
  const config = loadConfig(process.env, flags);
  const store = await openStoreForCli(config);
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
