import { Command, CommanderError } from 'commander';
import { afterAll, vi } from 'vitest';
import { registerAlerts } from '../../../cli/commands/alerts.js';
import { registerBudget, type StoreRunner } from '../../../cli/commands/budget.js';
import { registerBudgets } from '../../../cli/commands/budgets.js';
import { loadConfig } from '../../../src/config.js';
import { startDaemon } from '../../../src/server/daemon.js';
import { readLock } from '../../../src/store/lockfile.js';
import { localStore, openRemote } from '../../../src/admin/client.js';
import type { Db } from '../../../src/store/types.js';
import { silentLogger } from '../../budget/helpers/seed.js';
import type { Backend } from '../../helpers/stores.js';
import { tempDir } from '../../helpers/stores.js';

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `meter budget …` / `meter budgets …` / `meter alerts …` (or `commands`) in this process as cli/main.ts would: errors become
 *  one `meter: …` line on stderr and the error's exit code (1, or 2 for a usage error). */
export async function runCli(
  args: string[],
  run: StoreRunner,
  commands: ((program: Command, run: StoreRunner) => void)[] = [registerBudget, registerBudgets, registerAlerts],
): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const program = new Command('meter').exitOverride().configureOutput({
    writeOut: (s) => (stdout += s),
    writeErr: (s) => (stderr += s),
  });
  for (const register of commands) register(program, run);
  const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stdout += String(chunk);
    return true;
  });
  try {
    await program.parseAsync(args, { from: 'user' });
    return { code: 0, stdout, stderr };
  } catch (err) {
    if (err instanceof CommanderError) return { code: err.exitCode, stdout, stderr };
    // CliError carries its exit code (UsageError: 2), as cli/main.ts uses it.
    return {
      code: (err as { exitCode?: number }).exitCode ?? 1,
      stdout,
      stderr: `${stderr}meter: ${(err as Error).message}\n`,
    };
  } finally {
    spy.mockRestore();
  }
}

/**
 * The store the CLI would use on this back-end. PostgreSQL: directly. Embedded: through a
 * running daemon's admin API (the CLI's way in while a daemon holds the store), which runs
 * named commands only, so the commands are tested under that rule; `db` (for seeding and
 * checks) is then the daemon's own store.
 */
export async function cliStore(
  backend: Backend,
  env: Record<string, string> = {},
): Promise<{ db: Db; run: StoreRunner }> {
  const config = loadConfig(env);
  if (backend.name === 'postgres') {
    const db = await backend.open();
    return { db, run: (fn) => fn(localStore(db), config) };
  }
  const dataDir = tempDir();
  const daemon = await startDaemon(loadConfig({ ...env, METER_DATA_DIR: dataDir, METER_PORT: '0' }), silentLogger);
  const lock = readLock(dataDir)!;
  const remote = openRemote({ socket: lock.adminSocket, url: lock.adminUrl, token: lock.adminToken! });
  afterAll(async () => {
    await remote.close();
    await daemon.close();
  });
  return { db: daemon.store, run: (fn) => fn(remote, config) };
}
