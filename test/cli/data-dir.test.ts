import { spawn } from 'node:child_process';
import { chownSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/paths.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { tempDir } from '../helpers/stores.js';
import { METER_BIN } from '../helpers/cli.js';

/** A data directory meter cannot use is named at once, with the setting it came from, before
 *  anything says the store is being created: exit 2 for a wrong value, 1 for what the system
 *  refuses. Never a spin: `/proc/x` made Node's recursive mkdir loop, deaf to SIGTERM. */

function meter(args: string[], env: NodeJS.ProcessEnv = {}, ids: { uid?: number; gid?: number } = {}) {
  return new Promise<{ code: number | null; stderr: string; ms: number }>((resolve) => {
    const t0 = Date.now();
    const child = spawn(process.execPath, [METER_BIN, ...args], {
      cwd: packageRoot,
      env: { ...process.env, METER_LOG_LEVEL: 'info', METER_PORT: '0', DATABASE_URL: '', ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
      ...ids,
    });
    atFileEnd(() => child.kill('SIGKILL'));
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    // a spin would never end: SIGTERM after 20 s (then SIGKILL), and the exit status tells
    const term = setTimeout(() => child.kill('SIGTERM'), 20_000);
    child.on('exit', (code) => {
      clearTimeout(term);
      resolve({ code, stderr, ms: Date.now() - t0 });
    });
  });
}

describe('data directory errors', { timeout: 90_000 }, () => {
  it('a file in the way: exit 2, naming --data-dir', async () => {
    const file = join(tempDir(), 'not-a-dir');
    writeFileSync(file, '');
    for (const dir of [file, join(file, 'sub')]) {
      const r = await meter(['start', '--data-dir', dir]);
      expect(r.code).toBe(2);
      expect(r.stderr).toBe(
        `meter: the data directory "${dir}" (--data-dir) is not a directory: a file is in the way; choose another with --data-dir or METER_DATA_DIR\n`,
      );
    }
  });

  it('the same through METER_DATA_DIR names the variable; other commands too', async () => {
    const file = join(tempDir(), 'not-a-dir');
    writeFileSync(file, '');
    const start = await meter(['start'], { METER_DATA_DIR: file });
    expect(start.code).toBe(2);
    expect(start.stderr).toContain(`the data directory "${file}" (METER_DATA_DIR) is not a directory`);
    const list = await meter(['accounts', 'list'], { METER_DATA_DIR: file });
    expect(list.code).toBe(2);
    expect(list.stderr).toContain(`the data directory "${file}" (METER_DATA_DIR) is not a directory`);
  });

  it('/proc/x: exit 1 at once, no spin', async () => {
    for (const args of [
      ['start', '--data-dir', '/proc/x'],
      ['accounts', 'list'],
    ]) {
      const r = await meter(args, { METER_DATA_DIR: '/proc/x' });
      expect(r.code, r.stderr).toBe(1);
      expect(r.ms).toBeLessThan(15_000);
      expect(r.stderr).toMatch(
        /^meter: cannot create or write in the data directory "\/proc\/x" \((--data-dir|METER_DATA_DIR)\): its parent does not accept new directories; choose another with --data-dir or METER_DATA_DIR\n$/,
      );
    }
  });

  it('a directory this user may not write in: exit 1, permission denied', async () => {
    const parent = join(tempDir(), 'locked');
    mkdirSync(parent, { mode: 0o500 });
    // root may write anywhere: run as an ordinary user then
    const ids = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};
    if (process.getuid?.() === 0) chownSync(parent, 0, 0);
    const r = await meter(['start', '--data-dir', join(parent, 'data')], { HOME: parent }, ids);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(
      `meter: cannot create or write in the data directory "${join(parent, 'data')}" (--data-dir): permission denied for this user`,
    );
    expect(r.stderr).not.toContain('creating the embedded store');
  });
});
