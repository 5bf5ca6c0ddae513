/**
 * Export rows as text: CSV (RFC 4180: a header row, CRLF, fields quoted when they hold a comma,
 * quote or line break), JSONL (one JSON object per line) and FOCUS (CSV with the FOCUS 1.2
 * columns). Money stays the store's exact decimal text (8 decimals); counts are written as
 * their digits, never through a JS number.
 */
import { isoTime } from '../calendar.js';
import { stringTags } from '../tags.js';
import { integer, stringifyJson as toJson, type JsonValue } from '../money.js';
import { FOCUS_COLUMNS, FOCUS_FREE_TEXT, FocusRows, type FocusEvent, type FocusRow } from './focus.js';
import type { Pricer } from '../pricing/pricer.js';
import type { ExportParams } from './params.js';
import type { GroupRow, RawRow } from './rows.js';

export const RAW_COLUMNS = [
  'time',
  'provider',
  'model',
  'key_id',
  'status',
  'input_tokens',
  'cached_input_tokens',
  'output_tokens',
  'cost',
  'usage_source',
] as const;
const SUM_COLUMNS = ['requests', 'input_tokens', 'output_tokens', 'cost'] as const;

/**
 * A text cell a spreadsheet would run as a formula (=, +, -, @, tab, CR at its start) is written
 * with a leading apostrophe, which spreadsheets hide (OWASP "CSV injection"). Only text that
 * callers choose (models, tag values) can start so; numbers and times never go through this.
 */
function safeText(v: string): string {
  return /^[=+\-@\t\r]/.test(v) ? `'${v}` : v;
}

/** Quoted when it holds a comma, quote or line break (RFC 4180), or a semicolon or TAB: a file
 *  opened with one of those as its separator would otherwise split `x;=HYPERLINK(…)` into a
 *  cell that starts a formula. */
export function csvField(v: string | null | undefined): string {
  if (v === null || v === undefined) return '';
  return /[",;\t\r\n]/.test(v) || v !== v.trim() ? `"${v.replaceAll('"', '""')}"` : v;
}

export const csvLine = (fields: (string | null | undefined)[]) => `${fields.map(csvField).join(',')}\r\n`;

/** Turns rows into text, with the header first; made once per export (it knows the columns). */
export interface RowFormatter {
  contentType: string;
  extension: string;
  header: string;
  /** The batch's text, in pieces that are each written (and waited for) before the next is made. */
  batch(rows: (RawRow | GroupRow)[]): Iterable<string>;
  /** What is left once every row was given (FOCUS writes a day's rows when the day is over). */
  end?(): Iterable<string>;
}

/** FOCUS text is handed on in pieces of about this many characters (a stream's buffer). */
const PIECE = 64 * 1024;

/** FOCUS rows as CSV, made as they are written: a day's rows (thousands when tag sets vary) are
 *  never text together, and a piece is handed on before V8's young generation would keep it. */
function* focusText(rows: Iterable<FocusRow>): Generator<string> {
  let piece = '';
  for (const row of rows) {
    piece += csvLine(FOCUS_COLUMNS.map((c) => (FOCUS_FREE_TEXT.includes(c) && row[c] ? safeText(row[c]) : row[c])));
    if (piece.length >= PIECE) {
      yield piece;
      piece = '';
    }
  }
  if (piece) yield piece;
}

const CSV = 'text/csv; charset=utf-8; header=present';
const JSONL = 'application/x-ndjson; charset=utf-8';

export function rowFormatter(
  p: ExportParams,
  account: { id: string; name: string },
  tagKeys: readonly string[],
  pricer: Pricer,
): RowFormatter {
  if (p.format === 'focus') {
    const focus = new FocusRows(account, pricer);
    return {
      contentType: CSV,
      extension: 'csv',
      header: csvLine([...FOCUS_COLUMNS]),
      batch: (rows) => focusText(focus.add(rows as unknown as FocusEvent[])),
      end: () => focusText(focus.end()),
    };
  }
  const g = p.groupBy;
  const groupColumns = !g
    ? []
    : g.kind === 'day'
      ? ['day']
      : g.kind === 'model'
        ? ['provider', 'model']
        : [`tag:${g.key}`];
  const csv = p.format === 'csv';
  if (g) {
    const cells = (r: GroupRow): (string | null)[] => {
      const group = g.kind === 'day' ? [r.day!] : g.kind === 'model' ? [r.provider!, r.model!] : [r.tag_value ?? null];
      return [...group, r.requests, r.input_tokens, r.output_tokens, r.cost];
    };
    const names = [...groupColumns, ...SUM_COLUMNS];
    return {
      contentType: csv ? CSV : JSONL,
      extension: csv ? 'csv' : 'jsonl',
      header: csv ? csvLine(names) : '',
      batch: (rows) => [
        rows
          .map((r) => {
            const c = cells(r as GroupRow);
            if (csv) return csvLine(c.map((v, i) => (i < groupColumns.length && v !== null ? safeText(v) : v)));
            const obj: Record<string, JsonValue> = {};
            names.forEach((n, i) => {
              const v = c[i] ?? null;
              obj[n] = i >= groupColumns.length && n !== 'cost' ? integer(v!) : v;
            });
            return `${toJson(obj)}\n`;
          })
          .join(''),
      ],
    };
  }
  const tagColumns = tagKeys.map((k) => `tag:${k}`);
  return {
    contentType: csv ? CSV : JSONL,
    extension: csv ? 'csv' : 'jsonl',
    header: csv ? csvLine([...RAW_COLUMNS, ...tagColumns]) : '',
    batch: (rows) => [
      rows
        .map((row) => {
          const r = row as RawRow;
          const tags = stringTags(r.tags);
          if (csv) {
            return csvLine([
              isoTime(r.time_utc),
              r.provider,
              safeText(r.model),
              r.key_id,
              String(r.status),
              r.input_tokens,
              r.cached_input_tokens,
              r.output_tokens,
              r.cost,
              r.usage_source,
              ...tagKeys.map((k) => (tags[k] === undefined ? null : safeText(tags[k]))),
            ]);
          }
          return `${toJson({
            time: isoTime(r.time_utc),
            provider: r.provider,
            model: r.model,
            key_id: r.key_id,
            status: r.status,
            input_tokens: integer(r.input_tokens),
            cached_input_tokens: integer(r.cached_input_tokens),
            output_tokens: integer(r.output_tokens),
            cost: r.cost,
            usage_source: r.usage_source,
            tags,
          })}\n`;
        })
        .join(''),
    ],
  };
}
