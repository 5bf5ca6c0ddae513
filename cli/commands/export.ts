import type { Command } from 'commander';
import { once } from 'node:events';
import { EXPORT_FORMATS } from '../../src/export/params.js';
import { focusMetadata } from '../../src/export/focus.js';
import { exportAccount, exportParamsOf, type ExportArgs } from '../../src/export/admin.js';
import { prepareExport, streamSink, writeExport, type ExportSink } from '../../src/export/run.js';
import { openAside, writeWhole } from '../aside-file.js';
import { CliError, UsageError, withStore } from '../context.js';

interface ExportOpts {
  account: string;
  from?: string;
  to?: string;
  format: string;
  groupBy?: string;
  out?: string;
  json?: boolean;
}

/** Counts what passes and, on a terminal, redraws one progress line on stderr (5 times a second at most). */
function counted(sink: ExportSink, tty: boolean, headerLines: number) {
  const started = Date.now();
  let bytes = 0;
  let lines = 0;
  let drawn = 0;
  const text = () =>
    `${Math.max(0, lines - headerLines).toLocaleString('en-US')} rows, ${(bytes / 1e6).toFixed(1)} MB, ${((Date.now() - started) / 1000).toFixed(1)} s`;
  return {
    sink: {
      async write(chunk: string) {
        bytes += Buffer.byteLength(chunk);
        for (let i = chunk.indexOf('\n'); i !== -1; i = chunk.indexOf('\n', i + 1)) lines++;
        if (tty && Date.now() - drawn >= 200) {
          drawn = Date.now();
          process.stderr.write(`\r\u001B[Kexporting: ${text()}`);
        }
        await sink.write(chunk);
      },
    } satisfies ExportSink,
    done(where: string) {
      if (tty) process.stderr.write(`\r\u001B[Kexported ${text()}${where}\n`);
      return { rows: Math.max(0, lines - headerLines), bytes };
    },
  };
}

/** FOCUS metadata (FocusVersion and the schema) beside the file, written whole or not at all. */
async function writeFocusMetadata(file: string): Promise<void> {
  await writeWhole(`${file}.metadata.json`, '--out', `${JSON.stringify(focusMetadata(new Date()), null, 2)}\n`);
}

export function registerExport(program: Command): void {
  program
    .command('export')
    .description("an account's usage as CSV, JSONL or FOCUS 1.2 (CSV), for spreadsheets and FinOps tools; streamed")
    .requiredOption('--account <name>', 'the account')
    .option('--from <date>', 'first UTC day, inclusive (YYYY-MM-DD; default: the first of this month)')
    .option('--to <date>', 'UTC day to stop before, exclusive (YYYY-MM-DD; default: the first of next month)')
    .requiredOption('--format <format>', `one of ${EXPORT_FORMATS.join(', ')}`)
    .option('--group-by <group>', 'day, model or tag:<key> (default: one row per call)')
    .option('--out <file>', 'write to this file (default: standard output)')
    .option(
      '--json',
      'print {"account","from","to","format","group_by","rows","bytes","out"} when done (on stderr without --out)',
    )
    .action(async (opts: ExportOpts) => {
      const args: ExportArgs = {
        account: opts.account,
        format: opts.format,
        ...(opts.from !== undefined ? { from: opts.from } : {}),
        ...(opts.to !== undefined ? { to: opts.to } : {}),
        ...(opts.groupBy !== undefined ? { groupBy: opts.groupBy } : {}),
      };
      const checked = exportParamsOf(args);
      if (!checked.ok) throw new UsageError(`${checked.message} (see \`meter export --help\`)`);
      const p = checked.value;
      // A file appears whole or not at all: written aside, renamed when the export is complete.
      const aside = opts.out ? await openAside(opts.out, '--out') : undefined;
      // The stream owns the handle (a FileHandle stays open while a stream holds it, so closing it
      // ourselves would wait forever): it flushes the file to disk and closes it when it ends.
      const out = aside ? aside.handle.createWriteStream({ flush: true }) : process.stdout;
      let writeFailed: Error | undefined;
      if (aside) out.on('error', (err: Error) => (writeFailed ??= err));
      const progress = counted(streamSink(out), Boolean(process.stderr.isTTY), p.format === 'jsonl' ? 0 : 1);
      try {
        await withStore(async (store) => {
          const db = store.db;
          if (!db) {
            // The daemon holds the embedded store: it reads the rows and streams the text here.
            for await (const chunk of await store.stream!('export', args)) await progress.sink.write(chunk.toString());
            return;
          }
          const account = await exportAccount(db, opts.account);
          const formatter = await prepareExport(db, account, p);
          await writeExport(db, account, p, formatter, progress.sink);
        });
        if (aside) {
          const closed = once(out, 'close');
          await new Promise<void>((resolve, reject) =>
            out.end((err?: Error | null) => (err ? reject(err) : resolve())),
          );
          await closed;
          if (writeFailed) throw writeFailed;
          await aside.commit();
          if (p.format === 'focus') await writeFocusMetadata(opts.out!);
        }
      } catch (err) {
        if (aside) {
          out.destroy();
          await aside.discard();
        }
        if (err instanceof CliError) throw err;
        throw new CliError((err as Error).message);
      }
      const { rows, bytes } = progress.done(opts.out ? ` to ${opts.out}` : '');
      if (opts.json) {
        const summary = {
          account: opts.account,
          from: p.from,
          to: p.to,
          format: p.format,
          group_by: opts.groupBy ?? null,
        };
        const line = `${JSON.stringify({ ...summary, rows, bytes, out: opts.out ?? null })}\n`;
        (opts.out ? process.stdout : process.stderr).write(line);
      }
    });
}
