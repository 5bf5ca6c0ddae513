/**
 * `meter export` through a daemon that holds the embedded store: POST /admin/export on its admin
 * API streams the export's text back (the only admin command that answers a stream, not JSON).
 * The daemon reads the rows, so nothing but the text crosses the socket.
 */
import type { ServerResponse } from 'node:http';
import { z } from 'zod';
import { unknownAccount } from '../auth/accounts.js';
import { sendError } from '../http.js';
import type { Db, Queryable } from '../store/types.js';
import { checkExportParams, CLI_NAMES, type ExportParams } from './params.js';
import { prepareExport, streamSink, writeExport, type ExportAccount } from './run.js';

export const EXPORT_ARGS = z.strictObject({
  account: z.string().min(1).max(256),
  from: z.string().max(32).optional(),
  to: z.string().max(32).optional(),
  format: z.string().max(32),
  groupBy: z.string().max(80).optional(),
});
export type ExportArgs = z.output<typeof EXPORT_ARGS>;

/** The account by name; an unknown one is a user error naming the accounts' command. */
export async function exportAccount(db: Queryable, name: string): Promise<ExportAccount> {
  const [row] = await db.query<{ id: string; name: string }>('SELECT id, name FROM accounts WHERE name = $1', [name]);
  if (!row) throw unknownAccount(name);
  return row;
}

/** The export's parameters as the CLI's flags name them (a usage error says which flag). */
export function exportParamsOf(args: ExportArgs, now = new Date()) {
  return checkExportParams(args, now, CLI_NAMES);
}

export async function streamAdminExport(db: Db, args: unknown, res: ServerResponse): Promise<void> {
  const parsed = EXPORT_ARGS.safeParse(args);
  if (!parsed.success) return sendError(res, 400, 'invalid_parameter', `export: ${parsed.error.issues[0]!.message}`);
  const checked = exportParamsOf(parsed.data);
  if (!checked.ok) return sendError(res, 400, 'invalid_parameter', checked.message);
  const p: ExportParams = checked.value;
  let account: ExportAccount;
  try {
    account = await exportAccount(db, parsed.data.account);
  } catch (err) {
    return sendError(res, 400, 'invalid_parameter', (err as Error).message);
  }
  const formatter = await prepareExport(db, account, p);
  res.writeHead(200, { 'content-type': formatter.contentType });
  try {
    await writeExport(db, account, p, formatter, streamSink(res));
    res.end();
  } catch {
    res.destroy();
  }
}
