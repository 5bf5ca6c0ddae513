import { Command, CommanderError } from 'commander';
import { afterAll, vi } from 'vitest';
import { registerAlerts } from '../../../cli/commands/alerts.js';
import { registerBudget, type StoreRunner } from '../../../cli/commands/budget.js';
import { loadConfig } from '../../../src/config.js';
import { startDaemon } from '../../../src/server/daemon.js';
import { readLock } from '../../../src/store/lockfile.js';
import { openRemote } from '../../../src/store/remote.js';
import type { Db } from '../../../src/store/types.js';
import { silentLogger } from '../../budget/helpers/seed.js';
import type { Backend } from '../../helpers/stores.js';
import { tempDir } from '../../helpers/stores.js';

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `meter budget …` / `meter alerts …` in this process as cli/main.ts would: errors become
 *  one `meter: …` line on stderr and exit code 1. */
export async function runCli(args: string[], run: StoreRunner): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const program = new Command('meter').exitOverride().configureOutput({
    writeOut: (s) => (stdout += s),
    writeErr: (s) => (stderr += s),
  });
  registerBudget(program, run);
  registerAlerts(program, run);
  const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stdout += String(chunk);
    return true;
  });
  try {
    await program.parseAsync(args, { from: 'user' });
    return { code: 0, stdout, stderr };
  } catch (err) {
    if (err instanceof CommanderError) return { code: err.exitCode, stdout, stderr };
    return { code: 1, stdout, stderr: `${stderr}meter: ${(err as Error).message}\n` };
  } finally {
    spy.mockRestore();
  }
}

/**
 * The store the CLI would use on this back-end. PostgreSQL: directly. Embedded: through a
 * running daemon's admin API (the CLI's way in while a daemon holds the store), which runs
 * single statements only, so the commands are tested under that rule.
 */
export async function cliStore(backend: Backend, env: Record<string, string> = {}): Promise<{ db: Db; run: StoreRunner }> {
  const config = loadConfig(env);
  let db: Db;
  if (backend.name === 'postgres') {
    db = await backend.open();
  } else {
    const dataDir = tempDir();
    const daemon = await startDaemon(loadConfig({ METER_DATA_DIR: dataDir, METER_PORT: '0' }), silentLogger, []);
    afterAll(() => daemon.close());
    db = openRemote(daemon.url, readLock(dataDir)!.adminToken!);
  }
  return { db, run: (fn) => fn(db, config) };
}
