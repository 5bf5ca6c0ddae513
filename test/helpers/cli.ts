import { spawn } from 'node:child_process';
import { packageRoot } from '../../src/paths.js';

/** The `meter` binary (package.json's bin). */
export const METER_BIN = 'dist/cli/main.js';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `meter <args>` as built (dist/, which the global setup keeps up to date), as a separate
 *  process like a user would. */
export function runCli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [METER_BIN, ...args], {
      cwd: packageRoot,
      env: { ...process.env, METER_LOG_LEVEL: 'silent', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Runs `meter` once per argument list, at most `parallel` at a time, the results in order. Each
 *  run is a Node process starting the CLI: forty at once (as the usage test once
 *  started them) drove a 2-core machine's load to 50 and timed out other test files. */
export async function runClis(argLists: string[][], env: NodeJS.ProcessEnv = {}, parallel = 3): Promise<CliResult[]> {
  const results: CliResult[] = new Array<CliResult>(argLists.length);
  let next = 0;
  const worker = async () => {
    while (next < argLists.length) {
      const i = next++;
      results[i] = await runCli(argLists[i]!, env);
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, argLists.length) }, worker));
  return results;
}
