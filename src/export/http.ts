/**
 * GET /analytics/export (CONTRACT §4): the caller's account, streamed as CSV, JSONL or FOCUS.
 * Parameters are checked before anything is sent (400 names the parameter); once rows flow,
 * a failure can only cut the response short, and it is logged. A slow reader costs only its
 * own export: rows are read in short statements (src/export/rows.ts), an account runs a few
 * exports at a time on each sidecar, and a reader that takes nothing for a while is let go.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Principal } from '../auth/types.js';
import type { Logger } from '../log.js';
import { sendError } from '../http.js';
import type { Queryable } from '../store/types.js';
import { FOCUS_VERSION } from './focus.js';
import { checkExportParams, type Checked, type ExportParams } from './params.js';
import { exportFileName, prepareExport, StalledReader, streamSink, writeExport } from './run.js';

const NAMES = ['from', 'to', 'format', 'group_by'];

/** Exports one account may run at once on one sidecar. */
export const EXPORTS_PER_ACCOUNT = 2;
/** How long an export waits for a reader that takes nothing before it lets go. */
export const EXPORT_IDLE_MS = 60_000;

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

/** The exports running now, per account. */
export class ExportSlots {
  readonly #open = new Map<string, number>();
  constructor(readonly perAccount = EXPORTS_PER_ACCOUNT) {}

  /** A slot for the account (its release), or undefined when it already runs its share. */
  take(accountId: string): (() => void) | undefined {
    const n = this.#open.get(accountId) ?? 0;
    if (n >= this.perAccount) return undefined;
    this.#open.set(accountId, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = this.#open.get(accountId)! - 1;
      if (left) this.#open.set(accountId, left);
      else this.#open.delete(accountId);
    };
  }
}

export interface ExportOptions {
  slots: ExportSlots;
  idleMs?: number;
  logger?: Pick<Logger, 'error' | 'info'>;
}

export async function serveExport(
  db: Queryable,
  principal: Principal,
  req: IncomingMessage,
  res: ServerResponse,
  search: URLSearchParams,
  now: Date,
  { slots, idleMs = EXPORT_IDLE_MS, logger }: ExportOptions,
): Promise<void> {
  const checked = parseQuery(search, now);
  if (!checked.ok) return sendError(res, 400, 'invalid_parameter', checked.message);
  const p = checked.value;
  const release = slots.take(principal.accountId);
  if (!release) {
    return sendError(
      res,
      429,
      'rate_limited',
      `this account already runs ${slots.perAccount} exports: wait for one to finish (or cancel it) and retry`,
      { headers: { 'retry-after': 5 } },
    );
  }
  res.once('close', release);
  const account = { id: principal.accountId, name: principal.accountName };
  const formatter = await prepareExport(db, account, p);
  res.writeHead(200, {
    'content-type': formatter.contentType,
    'content-disposition': `attachment; filename="${exportFileName(account.name, p, formatter.extension)}"`,
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    // FOCUS names its version in metadata kept apart from the rows (specification/metadata).
    ...(p.format === 'focus' ? { 'x-focus-version': FOCUS_VERSION } : {}),
  });
  try {
    await writeExport(db, account, p, formatter, streamSink(res, { idleMs }));
    res.end();
  } catch (err) {
    if (err instanceof StalledReader) logger?.info(err.message);
    else if (!req.destroyed && !res.destroyed)
      logger?.error({ err: { message: (err as Error).message } }, 'export failed midway: the response was cut short');
    res.destroy();
  }
}
