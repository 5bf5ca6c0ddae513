/**
 * Calendar windows: the day, ISO week (from Monday), month or quarter that contains an instant,
 * as instants (`start` inclusive, `end` exclusive) and as calendar days (`YYYY-MM-DD`, the form
 * DATE columns come back in). A leaf: budgets, plans, analytics, retention and `meter top` all
 * take their windows from here.
 *
 * Every window is found in two steps: the instant's calendar date in a time zone, then the
 * window's first and next-first dates turned back into instants in that zone. In UTC (CONTRACT
 * §4: analytics days are UTC days) both steps are plain Date.UTC arithmetic; in an IANA zone
 * (budgets, CONTRACT §6) they use the zone rules Node's Intl carries (the ICU tz data).
 */

export type WindowKind = 'day' | 'week' | 'month' | 'quarter';
/** The periods of /analytics/by-tag. */
export type Period = 'week' | 'month' | 'quarter';
export const PERIODS: readonly Period[] = ['week', 'month', 'quarter'];
/** An IANA zone name ('UTC', 'Asia/Kolkata', 'America/New_York'); see validTimeZone. */
export type TimeZone = string;

/** A calendar date; `month` 0–11 as Date's, and any overflow rolls over as in Date.UTC. */
interface CivilDate {
  year: number;
  month: number;
  day: number;
}

const DAY_MS = 86_400_000;

const formatters = new Map<string, Intl.DateTimeFormat>();

/** A formatter giving an instant's wall clock in `zone` (cached: building one costs ~50 µs). */
function wallClock(zone: string): Intl.DateTimeFormat {
  let f = formatters.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(zone, f);
  }
  return f;
}

/** The zone's offset from UTC at an instant, in ms (east positive). Whole seconds: every
 *  offset in the tz data is. */
export function zoneOffsetMs(instant: number, zone: TimeZone): number {
  if (zone === 'UTC') return 0;
  const p: Record<string, number> = {};
  for (const part of wallClock(zone).formatToParts(instant)) if (part.type !== 'literal') p[part.type] = +part.value;
  const wall = Date.UTC(p.year!, p.month! - 1, p.day!, p.hour!, p.minute!, p.second!);
  return wall - (instant - (((instant % 1000) + 1000) % 1000));
}

/** An IANA zone name Intl knows, as the user spelled it (ICU calls Asia/Kolkata by its old name
 *  Asia/Calcutta; the user's name is kept), or in ICU's case when only the case differs;
 *  undefined for a name Intl does not know. */
export function validTimeZone(zone: string): string | undefined {
  if (!/^[A-Za-z][A-Za-z0-9_+\-/]{0,63}$/.test(zone)) return undefined;
  if (zone.toUpperCase() === 'UTC') return 'UTC';
  try {
    const resolved = new Intl.DateTimeFormat('en-US', { timeZone: zone }).resolvedOptions().timeZone;
    return resolved.toLowerCase() === zone.toLowerCase() ? resolved : zone;
  } catch {
    return undefined;
  }
}

/** The calendar date of an instant in `zone`, and its weekday (Monday 0 … Sunday 6). */
function dateIn(instant: number, zone: TimeZone): CivilDate & { weekday: number } {
  const d = new Date(instant + zoneOffsetMs(instant, zone));
  return { year: d.getUTCFullYear(), month: d.getUTCMonth(), day: d.getUTCDate(), weekday: (d.getUTCDay() + 6) % 7 };
}

/** The first instant of a calendar date in `zone`: its local midnight, or, where a DST change
 *  skips midnight (America/Santiago, Asia/Beirut), the first instant after the gap. */
function startOf(date: CivilDate, zone: TimeZone): number {
  const wall = Date.UTC(date.year, date.month, date.day);
  if (zone === 'UTC') return wall;
  // Offsets change at most twice a day: try the offsets in force 1 day around the wall time.
  const candidates = new Set([
    zoneOffsetMs(wall - DAY_MS, zone),
    zoneOffsetMs(wall, zone),
    zoneOffsetMs(wall + DAY_MS, zone),
  ]);
  let best: number | undefined;
  for (const off of candidates) {
    const t = wall - off;
    if (zoneOffsetMs(t, zone) === off && (best === undefined || t < best)) best = t;
  }
  if (best !== undefined) return best;
  // Midnight is in a gap: the day starts where the gap ends (the first instant whose wall clock
  // is on this date), found by bisection between the two offsets' readings.
  let lo = wall - Math.max(...candidates);
  let hi = wall - Math.min(...candidates);
  while (hi - lo > 1000) {
    const mid = Math.floor((lo + hi) / 2);
    if (mid + zoneOffsetMs(mid, zone) >= wall) hi = mid;
    else lo = mid;
  }
  return hi;
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

/** The window as calendar days: `from` its first day, `to` the next window's first (exclusive). UTC. */
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

/** An instant as ISO 8601 with the zone's offset at that instant: `2026-03-01T00:00:00+05:30`. */
export function isoInZone(instant: number, zone: TimeZone): string {
  const offset = zoneOffsetMs(instant, zone);
  const local = new Date(instant + offset).toISOString().slice(0, 19);
  const minutes = Math.round(Math.abs(offset) / 60_000);
  const sign = offset < 0 ? '-' : '+';
  return `${local}${sign}${String(Math.floor(minutes / 60)).padStart(2, '0')}:${String(minutes % 60).padStart(2, '0')}`;
}

/** A stored timestamp's text: `.123000Z` is written `.123Z` (like Date#toISOString); finer times keep their microseconds. */
export const isoTime = (t: string) => t.replace(/(\.\d{3})000Z$/, '$1Z');

/** The days a date given from outside may name (query parameters, flags): 1970-01-01 to
 *  9999-12-31. PostgreSQL refuses year 0 (`0000-01-01`), JavaScript writes years past 9999 as
 *  `+010000`, and no usage predates 1970: a date outside is refused as bad input up front. */
export const FIRST_DAY = '1970-01-01';
export const LAST_DAY = '9999-12-31';
export const DAY_RANGE = `from ${FIRST_DAY} to ${LAST_DAY}`;

/** A real calendar day `YYYY-MM-DD` in [FIRST_DAY, LAST_DAY] (V8 reads 2026-02-30 as 2 March:
 *  the text must round-trip). */
export function isCalendarDay(text: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(text) || text < FIRST_DAY || text > LAST_DAY) return false;
  const t = Date.parse(`${text}T00:00:00Z`);
  return !Number.isNaN(t) && new Date(t).toISOString().startsWith(text);
}
