import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/paths.js';
import { METER_BIN, runCli } from '../helpers/cli.js';
import { createTestDatabase, postgresUrl, tempDir } from '../helpers/stores.js';

/** `meter top | head`: the reader closes the pipe after the first lines. Like `git log | head`,
 *  the command ends quietly with exit 0: no EPIPE stack trace. */

/** Runs the built `meter <args>` with stdout a real pipe that this side closes after the first chunk. */
function closeAfterFirstChunk(args: string[], env: NodeJS.ProcessEnv) {
  return new Promise<{ code: number | null; signal: string | null; stderr: string; first: string }>((resolve) => {
    const child = spawn(process.execPath, [METER_BIN, ...args], {
      cwd: packageRoot,
      env: { ...process.env, METER_LOG_LEVEL: 'silent', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    let first = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdout.once('data', (d: Buffer) => {
      first = d.toString();
      child.stdout.destroy(); // the reader is gone: the next write is EPIPE
    });
    const killer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.on('exit', (code, signal) => {
      clearTimeout(killer);
      resolve({ code, signal, stderr, first });
    });
  });
}

describe.skipIf(!postgresUrl)('a closed stdout', () => {
  it('ends `meter top` (frames every 0.2 s to a pipe) quietly with exit 0', { timeout: 180_000 }, async () => {
    const env = { DATABASE_URL: await createTestDatabase(), METER_DATA_DIR: tempDir() };
    expect((await runCli(['accounts', 'create', 'acme'], env)).code).toBe(0);
    const r = await closeAfterFirstChunk(['top', '--account', 'acme', '--interval', '0.2'], env);
    expect(r.first).toContain('acme');
    expect(r).toMatchObject({ code: 0, signal: null, stderr: '' });
  });
});
