/**
 * A client that goes away mid-body is routine: the daemon says so in one info line, without a
 * stack, instead of an error-level "request failed".
 */
import { connect } from 'node:net';
import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import { setBudget } from '../../src/budget/admin.js';
import { loadConfig } from '../../src/config.js';
import { components } from '../../src/server/components.js';
import { startDaemon } from '../../src/server/daemon.js';
import { migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import { atFileEnd, tempDirAtFileEnd } from '../helpers/cleanup.js';
import { eventually } from '../helpers/fleet.js';
import { createTestDatabase, postgresUrl } from '../helpers/stores.js';
import { startFakeUpstream } from '../helpers/upstreams.js';

describe.skipIf(!postgresUrl)('clients that drop mid-body', () => {
  it('make one info line without a stack, never an error', { timeout: 60_000 }, async () => {
    const url = await createTestDatabase();
    const db = openPostgres(url);
    atFileEnd(() => db.close());
    await migrate(db);
    await createAccount(db, 'capped', 'pro');
    const { key } = await createKey(db, 'capped');
    // A hard cap: the daemon reads the body before it admits the call.
    await setBudget(db, 'capped', '100', true);
    const upstream = await startFakeUpstream();
    const lines: { level: number; msg: string; err?: unknown }[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _e, cb) {
        for (const l of chunk.toString().split('\n')) if (l) lines.push(JSON.parse(l));
        cb();
      },
    });
    const config = loadConfig({
      METER_PORT: '0',
      METER_DATA_DIR: tempDirAtFileEnd(),
      DATABASE_URL: url,
      METER_UPSTREAM_OPENAI: `${upstream.origin}/v1`,
    });
    const daemon = await startDaemon(config, pino({ level: 'debug' }, sink), components);
    atFileEnd(() => daemon.close());
    const { hostname, port } = new URL(daemon.url);
    for (let i = 0; i < 3; i++) {
      const socket = connect(Number(port), hostname);
      await new Promise<void>((r) => socket.once('connect', () => r()));
      socket.on('error', () => {});
      socket.write(
        `POST /proxy/openai/v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
          `Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n{"model":"gpt-4o","messages":[`,
      );
      await new Promise((r) => setTimeout(r, 200));
      socket.destroy();
    }
    await eventually(async () => lines.filter((l) => /client went away/.test(l.msg)).length === 3, 10_000, 'logged');
    expect(lines.filter((l) => l.level >= 40)).toEqual([]);
    const gone = lines.filter((l) => /client went away/.test(l.msg));
    for (const l of gone) {
      expect(l.level).toBeLessThanOrEqual(30);
      expect(JSON.stringify(l)).not.toMatch(/stack| {4}at /);
    }
    expect(upstream.requests).toHaveLength(0);
  });
});
