import { spawn } from 'node:child_process';
import { packageRoot } from '../../src/paths.js';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `meter <args>` from the source (through tsx), as a separate process like a user would. */
export function runCli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'cli/main.ts', ...args], {
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
