import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { lockPath } from '../../src/store/lockfile.js';
import { spawnDaemon } from '../helpers/daemon.js';
import { tempDir } from '../helpers/stores.js';
import { METER_BIN } from '../helpers/cli.js';

describe('meter start, as README tells a new user', () => {
  it('npm start runs on the embedded store, is ready, and exits 0 on SIGTERM', async () => {
    const dataDir = tempDir();
    // The README's command, with a free port and a private data directory.
    const daemon = await spawnDaemon('npm', ['start', '--silent'], {
      METER_PORT: '0',
      METER_DATA_DIR: dataDir,
      DATABASE_URL: '',
      METER_LOG_LEVEL: 'info',
    });
    expect(daemon.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(daemon.url).not.toMatch(/:0$/);
    const health = await fetch(`${daemon.url}/healthz`);
    expect(health.status).toBe(200);
    const ready = await fetch(`${daemon.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', store: 'embedded' });
    expect(existsSync(lockPath(dataDir))).toBe(true);
    expect(await daemon.stop('SIGTERM')).toBe(0);
    expect(existsSync(lockPath(dataDir))).toBe(false);
    expect(existsSync(join(dataDir, 'pgdata'))).toBe(true);
    // Logs are pino JSON on stderr.
    const lines = daemon
      .stderr()
      .trim()
      .split('\n')
      .filter((l) => l.startsWith('{'));
    expect(lines.map((l) => JSON.parse(l).msg)).toContain('meter stopped');
  });

  it('a bad setting stops it with a message naming the variable', async () => {
    const err = await spawnDaemon('node', [METER_BIN, 'start'], { METER_PORT: 'eighty' }).catch((e: Error) => e);
    expect((err as Error).message).toContain('exited with 2'); // a bad setting is a usage error
    expect((err as Error).message).toContain(
      'meter: METER_PORT="eighty" is invalid: expected an integer from 0 to 65535',
    );
  });

  it('a second daemon on the same data directory is refused clearly', async () => {
    const dataDir = tempDir();
    const env = { METER_PORT: '0', METER_DATA_DIR: dataDir, DATABASE_URL: '' };
    const first = await spawnDaemon('node', [METER_BIN, 'start'], env);
    try {
      const err = await spawnDaemon('node', [METER_BIN, 'start'], env).catch((e: Error) => e);
      expect((err as Error).message).toMatch(/in use by process \d+/);
    } finally {
      expect(await first.stop('SIGINT')).toBe(0);
    }
  });
});
