import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Db } from '../store/types.js';
import { sendError, sendJson } from './errors.js';

const MAX_BODY = 1 << 20;

/** The local admin API that CLI commands use when this daemon holds the embedded store.
 *  Its token is written only into the 0600 lock file inside METER_DATA_DIR, so only a user
 *  who could open the store files anyway can use it. */
export function createAdminApi(db: Db) {
  const token = randomBytes(32).toString('base64url');
  const expected = Buffer.from(`Bearer ${token}`);

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const given = Buffer.from(req.headers.authorization ?? '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      return sendError(res, 401, 'invalid_api_key', 'admin API: missing or wrong admin token');
    }
    if (req.method !== 'POST' || req.url !== '/admin/query') {
      return sendError(res, 404, 'not_found', `no admin route ${req.method} ${req.url}`);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > MAX_BODY) return sendError(res, 400, 'invalid_parameter', 'admin API: body over 1 MiB');
      chunks.push(chunk as Buffer);
    }
    let sql: unknown, params: unknown;
    try {
      ({ sql, params } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { sql?: unknown; params?: unknown });
    } catch {
      return sendError(res, 400, 'invalid_parameter', 'admin API: body must be JSON {"sql","params"}');
    }
    if (typeof sql !== 'string' || (params !== undefined && !Array.isArray(params))) {
      return sendError(res, 400, 'invalid_parameter', 'admin API: "sql" must be a string and "params" an array');
    }
    try {
      const rows = await db.query(sql, params as unknown[] | undefined);
      sendJson(res, 200, { rows }, {});
    } catch (err) {
      sendJson(res, 500, { error: { message: (err as Error).message } });
    }
  }

  return { token, handle };
}
