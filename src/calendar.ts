/**
 * Calendar windows: the day, ISO week (from Monday), month or quarter that contains an instant,
 * as instants (`start` inclusive, `end` exclusive) and as calendar days (`YYYY-MM-DD`, the form
 * DATE columns come back in). A leaf: budgets, plans, analytics, retention and `meter top` all
 * take their windows from here.
 *
 * Every window is found in two steps: the instant's calendar date in a time zone, then the
 * window's first and next-first dates turned back into instants in that zone. Only UTC exists
 * today (CONTRACT §4: days are UTC calendar days), where both steps are plain Date.UTC
 * arithmetic; a zone is another pair of `dateIn`/`startOf`, and every window follows.
 */

export type WindowKind = 'day' | 'week' | 'month' | 'quarter';
/** The periods of /analytics/by-tag. */
export type Period = 'week' | 'month' | 'quarter';
export const PERIODS: readonly Period[] = ['week', 'month', 'quarter'];
/** Today only UTC; an IANA zone name later. */
export type TimeZone = 'UTC';

/** A calendar date; `month` 0–11 as Date's, and any overflow rolls over as in Date.UTC. */
interface CivilDate {
  year: number;
  month: number;
  day: number;
}

const DAY_MS = 86_400_000;

/** The calendar date of an instant in `zone`, and its weekday (Monday 0 … Sunday 6). */
function dateIn(instant: number, _zone: TimeZone): CivilDate & { weekday: number } {
  const d = new Date(instant);
  return { year: d.getUTCFullYear(), month: d.getUTCMonth(), day: d.getUTCDate(), weekday: (d.getUTCDay() + 6) % 7 };
}

/** The first instant of a calendar date in `zone`. */
function startOf(date: CivilDate, _zone: TimeZone): number {
  return Date.UTC(date.year, date.month, date.day);
}

/** The window of `kind` that contains `instant`, or, with `offset`, the one that many windows
 *  later (negative: earlier). */
export function windowBounds(
  kind: WindowKind,
  instant: Date | number,
  offset = 0,
  zone: TimeZone = 'UTC',
): { start: number; end: number } {
  const { year, month, day, weekday } = dateIn(+instant, zone);
  let first: CivilDate;
  let next: CivilDate;
  switch (kind) {
    case 'day':
      first = { year, month, day: day + offset };
      next = { year, month, day: day + offset + 1 };
      break;
    case 'week': {
      const monday = day - weekday + 7 * offset;
      first = { year, month, day: monday };
      next = { year, month, day: monday + 7 };
      break;
    }
    case 'month':
      first = { year, month: month + offset, day: 1 };
      next = { year, month: month + offset + 1, day: 1 };
      break;
    case 'quarter': {
      const q = month - (month % 3) + 3 * offset;
      first = { year, month: q, day: 1 };
      next = { year, month: q + 3, day: 1 };
      break;
    }
  }
  return { start: startOf(first, zone), end: startOf(next, zone) };
}

/** The window as calendar days: `from` its first day, `to` the next window's first (exclusive). */
export function windowDays(kind: WindowKind, instant: Date | number, offset = 0): { from: string; to: string } {
  const { start, end } = windowBounds(kind, instant, offset);
  return { from: utcDay(start), to: utcDay(end) };
}

/** The UTC calendar day of an instant. */
export function utcDay(instant: Date | number): string {
  return new Date(instant).toISOString().slice(0, 10);
}

export function addDays(day: string, n: number): string {
  return utcDay(Date.parse(`${day}T00:00:00Z`) + n * DAY_MS);
}

/** The last `days` days ending today (UTC), today included: [from, to] both inclusive. */
export function dailyWindow(now: Date, days: number): { from: string; to: string } {
  const to = utcDay(now);
  return { from: addDays(to, -(days - 1)), to };
}

/** A UTC month: `month` is `YYYY-MM`, `from` its first day, `to` the next month's (exclusive). */
export interface MonthWindow {
  month: string;
  from: string;
  to: string;
}

/** The UTC month that contains `now`. */
export function currentMonth(now: Date = new Date()): MonthWindow {
  const { from, to } = windowDays('month', now);
  return { month: from.slice(0, 7), from, to };
}

/** The current ISO week (from Monday), month or quarter: `to` is the next period's first day. */
export function currentPeriod(now: Date, period: Period): { from: string; to: string } {
  return windowDays(period, now);
}
