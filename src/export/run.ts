/**
 * One export, from the store to a sink, with bounded memory: the header first (the CSV's tag
 * columns come from one cheap query of the keys in range), then one batch of rows at a time,
 * each written and waited for before the next is read (the sink's backpressure reaches the
 * database cursor).
 */
import { MeterFailure } from '../errors.js';
import type { Queryable } from '../store/types.js';
import type { Pricer } from '../pricing/pricer.js';
import { exportPricer } from './focus.js';
import { rowFormatter, type RowFormatter } from './format.js';
import type { ExportParams } from './params.js';
import { eachBatch, tagKeys } from './rows.js';

export interface ExportSink {
  /** Resolves when the sink can take more (a stream's 'drain'). */
  write(text: string): Promise<void>;
}

export interface ExportProgress {
  rows: number;
  bytes: number;
}

export interface ExportAccount {
  id: string;
  name: string;
}

/** The formatter for an export (its columns, content type), before any row is read. */
export async function prepareExport(
  db: Queryable,
  account: ExportAccount,
  p: ExportParams,
  pricer: Pricer = exportPricer(),
): Promise<RowFormatter> {
  const keys = p.format === 'csv' && !p.groupBy ? await tagKeys(db, account.id, p) : [];
  return rowFormatter(p, account, keys, pricer);
}

export async function writeExport(
  db: Queryable,
  account: ExportAccount,
  p: ExportParams,
  formatter: RowFormatter,
  sink: ExportSink,
  onProgress?: (progress: ExportProgress) => void,
): Promise<ExportProgress> {
  const progress: ExportProgress = { rows: 0, bytes: 0 };
  const put = async (text: string) => {
    if (!text) return;
    progress.bytes += Buffer.byteLength(text);
    await sink.write(text);
  };
  await put(formatter.header);
  await eachBatch(db, account.id, p, async (rows) => {
    progress.rows += rows.length;
    for (const text of formatter.batch(rows)) await put(text);
    onProgress?.(progress);
  });
  for (const text of formatter.end?.() ?? []) await put(text);
  return progress;
}

/** A sink over a Node writable (an HTTP response, a file, stdout): waits for 'drain' when full,
 *  and fails when the other end went away (the export stops at the next batch) or, with
 *  `idleMs`, when it took nothing for that long (a reader that stalls is let go). */
export function streamSink(
  out: NodeJS.WritableStream & { destroyed?: boolean },
  opts: { idleMs?: number } = {},
): ExportSink {
  return {
    write(text) {
      if (out.destroyed) return Promise.reject(new Error('the export was cancelled: its reader went away'));
      if (out.write(text)) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const done = (err?: Error) => {
          clearTimeout(idle);
          out.off('drain', ok);
          out.off('close', closed);
          out.off('error', done);
          if (err) reject(err);
          else resolve();
        };
        const ok = () => done();
        const closed = () => done(new Error('the export was cancelled: its reader went away'));
        const idle =
          opts.idleMs === undefined ? undefined : setTimeout(() => done(new StalledReader(opts.idleMs!)), opts.idleMs);
        out.once('drain', ok);
        out.once('close', closed);
        out.once('error', done);
      });
    },
  };
}

/** The reader took nothing for `idleMs`: the export stops and lets go of what it holds. */
export class StalledReader extends MeterFailure {
  override name = 'StalledReader';
  constructor(idleMs: number) {
    super(`the export was cancelled: its reader took nothing for ${idleMs / 1000} s`);
  }
}

/** `meter-<account>-<from>-<to>[-<grouping>].<ext>`: the file name an export suggests. */
export function exportFileName(account: string, p: ExportParams, extension: string): string {
  const g = p.groupBy ? `-by-${p.groupBy.kind === 'tag' ? `tag-${p.groupBy.key}` : p.groupBy.kind}` : '';
  const kind = p.format === 'focus' ? '-focus' : '';
  return `meter-${account}-${p.from}-${p.to}${kind}${g}.${extension}`;
}
