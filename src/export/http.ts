/**
 * GET /analytics/export (CONTRACT §4): the caller's account, streamed as CSV, JSONL or FOCUS.
 * Parameters are checked before anything is sent (400 names the parameter); once rows flow,
 * a failure can only cut the response short, and it is logged.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Principal } from '../auth/types.js';
import type { Logger } from '../log.js';
import { sendError } from '../http.js';
import type { Db } from '../store/types.js';
import { checkExportParams, type Checked, type ExportParams } from './params.js';
import { exportFileName, prepareExport, streamSink, writeExport } from './run.js';

const NAMES = ['from', 'to', 'format', 'group_by'];

function parseQuery(search: URLSearchParams, now: Date): Checked<ExportParams> {
  const input: Record<string, string> = {};
  for (const [name, value] of search) {
    if (!NAMES.includes(name))
      return {
        ok: false,
        param: name,
        message: `unknown parameter ${JSON.stringify(name.slice(0, 60))}: this endpoint takes ${NAMES.join(', ')}`,
      };
    if (Object.hasOwn(input, name)) return { ok: false, param: name, message: `${name} is given more than once` };
    input[name] = value;
  }
  return checkExportParams({ from: input.from, to: input.to, format: input.format, groupBy: input.group_by }, now);
}

export async function serveExport(
  db: Db,
  principal: Principal,
  req: IncomingMessage,
  res: ServerResponse,
  search: URLSearchParams,
  now: Date,
  logger?: Pick<Logger, 'error'>,
): Promise<void> {
  const checked = parseQuery(search, now);
  if (!checked.ok) return sendError(res, 400, 'invalid_parameter', checked.message);
  const p = checked.value;
  const account = { id: principal.accountId, name: principal.accountName };
  const formatter = await prepareExport(db, account, p);
  res.writeHead(200, {
    'content-type': formatter.contentType,
    'content-disposition': `attachment; filename="${exportFileName(account.name, p, formatter.extension)}"`,
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
  });
  try {
    await writeExport(db, account, p, formatter, streamSink(res));
    res.end();
  } catch (err) {
    if (!req.destroyed && !res.destroyed)
      logger?.error({ err: { message: (err as Error).message } }, 'export failed midway: the response was cut short');
    res.destroy();
  }
}
