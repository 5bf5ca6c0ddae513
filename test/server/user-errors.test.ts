import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { openRemote } from '../../src/admin/client.js';
import { startAdminServer } from '../../src/admin/server.js';
import { loadConfig } from '../../src/config.js';
import { MeterError } from '../../src/errors.js';
import { startDaemon } from '../../src/server/daemon.js';
import { exitCodeOf } from '../../cli/usage.js';
import { atFileEnd, tempDirAtFileEnd } from '../helpers/cleanup.js';
import { openStoreForFile } from '../helpers/file-stores.js';
import { postgresUrl } from '../helpers/stores.js';

/** A user error a new feature might add: nothing else needs to know it for it to be answered right. */
class SeatsTakenError extends MeterError {
  override name = 'SeatsTakenError';
  override readonly code = 'forbidden';
  override readonly status = 403;
  override readonly exitCode = 2;
}

describe('one base class for user errors, mapped once', () => {
  it('the HTTP layer answers a new subclass with its status and code, anything else with a 500', async () => {
    const daemon = await startDaemon(
      loadConfig({ METER_PORT: '0', METER_DATA_DIR: tempDirAtFileEnd() }),
      pino({ level: 'silent' }),
      (_ctx, start) =>
        start({
          name: 'throws',
          routes: {
            '/seats': () => {
              throw new SeatsTakenError('all 5 seats are taken: free one with `meter seats remove`');
            },
            '/async-seats': async () => {
              throw new SeatsTakenError('no seat left');
            },
            '/bug': () => {
              throw new TypeError('x is undefined');
            },
          },
        }),
    );
    atFileEnd(() => daemon.close());
    const seats = await fetch(`${daemon.url}/seats`);
    expect(seats.status).toBe(403);
    expect(await seats.json()).toEqual({
      error: {
        type: 'permission_error',
        code: 'forbidden',
        message: 'all 5 seats are taken: free one with `meter seats remove`',
      },
    });
    expect((await fetch(`${daemon.url}/async-seats`)).status).toBe(403);
    const bug = await fetch(`${daemon.url}/bug`);
    expect(bug.status).toBe(500);
    expect(await bug.json()).toMatchObject({ error: { code: 'internal_error', message: 'internal error in meter' } });
  }, 60_000);

  it('the CLI exits with the subclass exit code; other errors exit 1', () => {
    expect(exitCodeOf(new SeatsTakenError('no seat'))).toBe(2);
    expect(exitCodeOf(new MeterError('bad'))).toBe(1);
    expect(exitCodeOf(new Error('bug'))).toBe(1);
  });

  it.skipIf(!postgresUrl)(
    "the admin API answers a command's user error with its status, and the CLI side gets it back as a user error",
    async () => {
      const db = await openStoreForFile('postgres');
      const admin = await startAdminServer(db, tempDirAtFileEnd(), {}, pino({ level: 'silent' }));
      atFileEnd(() => admin.close());
      const remote = openRemote(admin);
      atFileEnd(() => remote.close());
      const err = await remote.call('accounts.setPlan', { name: 'nobody', plan: 'pro' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(MeterError);
      expect(err).toMatchObject({ status: 400, code: 'invalid_parameter', message: expect.stringMatching(/nobody/) });
      expect(exitCodeOf(err)).toBe(1);
    },
  );
});
