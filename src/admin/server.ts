import { randomBytes, timingSafeEqual } from 'node:crypto';
import { chmodSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { userError } from '../errors.js';
import type { Logger } from '../log.js';
import { sendError, sendJson } from '../http.js';
import type { AdminAddress } from '../store/lockfile.js';
import type { Db } from '../store/types.js';
import { streamAdminExport } from '../export/admin.js';
import {
  adminCommands,
  isAdminCommand,
  runAdminCommand,
  type AdminCommandName,
  type AdminContext,
} from './commands.js';

const MAX_BODY = 8 << 20;
/** sun_path holds 108 bytes on Linux and 104 on macOS, terminator included. */
const MAX_SOCKET_PATH = 103;

/** A user error from a command (unknown account, key limit reached…): 400 with its message. */
/**
 * The admin API of a daemon that holds the embedded store: `POST /admin/<command>` with JSON
 * arguments runs one entry of adminCommands (never SQL from the caller). It never listens on
 * the daemon's port: a Unix socket in the data directory (0600), or, when that path is too long
 * for the OS, a random port on 127.0.0.1. Either way the caller also needs the token, which is
 * only in the 0600 lock file.
 */
export async function startAdminServer(
  db: Db,
  dataDir: string,
  ctx: AdminContext,
  logger: Logger,
): Promise<AdminAddress & { close(): Promise<void> }> {
  const token = randomBytes(32).toString('base64url');
  const expected = Buffer.from(`Bearer ${token}`);

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const given = Buffer.from(req.headers.authorization ?? '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      return sendError(res, 401, 'invalid_api_key', 'admin API: missing or wrong admin token');
    }
    const name = (req.url ?? '').startsWith('/admin/') ? req.url!.slice('/admin/'.length) : '';
    // `export` answers a stream of text instead of one JSON result (src/export/admin.ts).
    const streamed = name === 'export';
    if (req.method !== 'POST' || (!isAdminCommand(name) && !streamed)) {
      return sendError(
        res,
        404,
        'not_found',
        `admin API: no command ${req.method} ${JSON.stringify((req.url ?? '').slice(0, 100))}; ` +
          `POST /admin/<command>, command one of ${[...Object.keys(adminCommands), 'export'].join(', ')}`,
      );
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > MAX_BODY) return sendError(res, 413, 'invalid_parameter', 'admin API: arguments over 8 MiB');
      chunks.push(chunk as Buffer);
    }
    let args: unknown;
    try {
      args = size === 0 ? {} : JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      return sendError(res, 400, 'invalid_parameter', 'admin API: the body must be a JSON object of arguments');
    }
    if (streamed) return streamAdminExport(db, args, res);
    try {
      sendJson(res, 200, { result: (await runAdminCommand(db, name as AdminCommandName, args, ctx)) ?? null });
    } catch (err) {
      const e = err as Error;
      const user = userError(e);
      if (user) return sendError(res, user.status, user.code, user.message);
      logger.error({ command: name, err: e }, 'admin command failed');
      sendError(res, 500, 'internal_error', `${name} failed: ${e.message}`);
    }
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: Error) => sendError(res, 500, 'internal_error', err.message));
  });
  const socket = join(dataDir, 'meter.sock');
  const useSocket = process.platform !== 'win32' && Buffer.byteLength(socket) <= MAX_SOCKET_PATH;
  if (useSocket) rmSync(socket, { force: true }); // a dead daemon's socket: we hold the store's lock now
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    if (useSocket) server.listen(socket, resolve);
    else server.listen(0, '127.0.0.1', resolve);
  });
  let address: AdminAddress;
  if (useSocket) {
    chmodSync(socket, 0o600);
    address = { socket, token };
  } else {
    logger.warn(
      { dataDir },
      'METER_DATA_DIR is too long for a Unix socket path: the admin API listens on a random 127.0.0.1 port instead',
    );
    address = { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, token };
  }
  return {
    ...address,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      if (useSocket) rmSync(socket, { force: true });
    },
  };
}
