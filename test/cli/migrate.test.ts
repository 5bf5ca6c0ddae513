import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { loadMigrations } from '../../src/store/migrate.js';
import { startDaemon } from '../../src/server/daemon.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';
import { runCli } from '../helpers/cli.js';
import { backends, createTestDatabase, postgresUrl, tempDir } from '../helpers/stores.js';

describe('meter migrate', () => {
  for (const backend of backends) {
    it.skipIf(backend.name === 'postgres' && !postgresUrl)(
      `brings the ${backend.name} store to the latest version, and again is a no-op`,
      async () => {
        const { databaseUrl, dataDir } = await backend.config();
        const env = { DATABASE_URL: databaseUrl ?? '', METER_DATA_DIR: dataDir };
        const latest = loadMigrations(undefined, backend.name).at(-1)!;
        for (let run = 0; run < 2; run++) {
          const res = await runCli(['migrate', '--json'], env);
          expect(res.code).toBe(0);
          const out = JSON.parse(res.stdout) as { store: string; migrations: { version: number }[] };
          expect(out.store).toBe(backend.name);
          expect(out.migrations.at(-1)!.version).toBe(latest.version);
        }
      },
      120_000,
    );
  }
});

describe.skipIf(!postgresUrl)('/readyz', () => {
  it('answers 503 while the database is unreachable and 200 when it is back; /healthz stays 200', async () => {
    const url = await createTestDatabase();
    const relay = await startTcpProxy(url);
    const config = loadConfig({ METER_PORT: '0', METER_DATA_DIR: tempDir(), DATABASE_URL: relay.urlFor(url) });
    const daemon = await startDaemon(config, pino({ level: 'silent' }));
    try {
      expect((await fetch(`${daemon.url}/readyz`)).status).toBe(200);
      await relay.down();
      const down = await fetch(`${daemon.url}/readyz`);
      expect(down.status).toBe(503);
      expect(await down.json()).toEqual({ status: 'store unreachable', store: 'postgres' });
      expect((await fetch(`${daemon.url}/healthz`)).status).toBe(200);
      await relay.up();
      expect((await fetch(`${daemon.url}/readyz`)).status).toBe(200);
    } finally {
      await daemon.close();
      await relay.close();
    }
  });
});
