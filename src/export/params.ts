/**
 * What an export asks for (CONTRACT §4 /analytics/export, §1 `meter export`): a UTC date range
 * (`from` inclusive, `to` exclusive, default the current month), a format and an optional
 * grouping. The HTTP query and the CLI flags are checked by the same rules, so both refuse the
 * same input with the same words.
 */
import { DAY_RANGE, isCalendarDay, LAST_DAY } from '../calendar.js';

export const EXPORT_FORMATS = ['csv', 'jsonl', 'focus'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

export type GroupBy = { kind: 'day' } | { kind: 'model' } | { kind: 'tag'; key: string };

export interface ExportParams {
  /** `YYYY-MM-DD`, inclusive. */
  from: string;
  /** `YYYY-MM-DD`, exclusive. */
  to: string;
  format: ExportFormat;
  groupBy?: GroupBy;
}

export type Checked<T> = { ok: true; value: T } | { ok: false; param: string; message: string };

const TAG_KEY_RE = /^[A-Za-z0-9_.-]{1,64}$/;
/** Longest range one export covers: ten years of days (a typo of a year is refused, not run). */
const MAX_DAYS = 3_660;

const shown = (v: string) => JSON.stringify(v.length > 60 ? `${v.slice(0, 60)}…` : v);

export const firstOfMonth = (now: Date) => `${now.toISOString().slice(0, 7)}-01`;
export function firstOfNextMonth(now: Date): string {
  const d = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
  return d.toISOString().slice(0, 10);
}

/** Names as the caller typed them: `from` in HTTP, `--from` on the command line. */
export interface ParamNames {
  from: string;
  to: string;
  format: string;
  groupBy: string;
}

export const HTTP_NAMES: ParamNames = { from: 'from', to: 'to', format: 'format', groupBy: 'group_by' };
export const CLI_NAMES: ParamNames = { from: '--from', to: '--to', format: '--format', groupBy: '--group-by' };

export function checkExportParams(
  input: { from?: string; to?: string; format?: string; groupBy?: string },
  now: Date,
  names: ParamNames = HTTP_NAMES,
): Checked<ExportParams> {
  const bad = (param: string, message: string): Checked<ExportParams> => ({ ok: false, param, message });
  const format = input.format;
  if (format === undefined)
    return bad(names.format, `${names.format} is required: one of ${EXPORT_FORMATS.join(', ')}`);
  if (!(EXPORT_FORMATS as readonly string[]).includes(format))
    return bad(names.format, `${names.format} must be one of ${EXPORT_FORMATS.join(', ')}, got ${shown(format)}`);
  for (const name of ['from', 'to'] as const) {
    const v = input[name];
    if (v !== undefined && !isCalendarDay(v))
      return bad(names[name], `${names[name]} must be a UTC date YYYY-MM-DD ${DAY_RANGE}, got ${shown(v)}`);
  }
  const from = input.from ?? firstOfMonth(now);
  const to = input.to ?? (input.from ? nextDay(from) : firstOfNextMonth(now));
  if (!isCalendarDay(to))
    return bad(names.from, `${names.from} must be before ${LAST_DAY} when ${names.to} is not given`);
  if (from >= to)
    return bad(names.to, `${names.to} must be later than ${names.from} (from is inclusive, to exclusive)`);
  if (daysBetween(from, to) > MAX_DAYS) return bad(names.to, `the range must be at most ${MAX_DAYS} days`);
  let groupBy: GroupBy | undefined;
  const g = input.groupBy;
  if (g !== undefined) {
    if (g === 'day' || g === 'model') groupBy = { kind: g };
    else if (g.startsWith('tag:') && TAG_KEY_RE.test(g.slice(4))) groupBy = { kind: 'tag', key: g.slice(4) };
    else
      return bad(
        names.groupBy,
        `${names.groupBy} must be day, model or tag:<key> (key 1-64 characters of A-Z a-z 0-9 _ . -), got ${shown(g)}`,
      );
    if (format === 'focus')
      return bad(
        names.groupBy,
        `${names.groupBy} does not apply to focus: its rows are one per day, model and tag set`,
      );
  }
  return { ok: true, value: { from, to, format: format as ExportFormat, ...(groupBy ? { groupBy } : {}) } };
}

export function nextDay(day: string): string {
  return new Date(Date.parse(`${day}T00:00:00Z`) + 86_400_000).toISOString().slice(0, 10);
}

export const daysBetween = (from: string, to: string) =>
  Math.round((Date.parse(`${to}T00:00:00Z`) - Date.parse(`${from}T00:00:00Z`)) / 86_400_000);
