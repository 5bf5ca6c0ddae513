/** UTC calendar days for analytics windows (CONTRACT §4: days are UTC calendar days).
 *  Days are `YYYY-MM-DD` strings, the form DATE columns come back in. */

export type Period = 'week' | 'month' | 'quarter';
export const PERIODS: readonly Period[] = ['week', 'month', 'quarter'];

const DAY_MS = 86_400_000;

/** The UTC calendar day of an instant. */
export function utcDay(instant: Date): string {
  return instant.toISOString().slice(0, 10);
}

function fromYmd(year: number, monthIndex: number, day: number): string {
  return utcDay(new Date(Date.UTC(year, monthIndex, day)));
}

export function addDays(day: string, n: number): string {
  return utcDay(new Date(Date.parse(`${day}T00:00:00Z`) + n * DAY_MS));
}

/** The last `days` days ending today (UTC), today included: [from, to] both inclusive. */
export function dailyWindow(now: Date, days: number): { from: string; to: string } {
  const to = utcDay(now);
  return { from: addDays(to, -(days - 1)), to };
}

/** The current UTC month: `month` is `YYYY-MM`, `to` the next month's first day (exclusive). */
export function currentMonth(now: Date): { month: string; from: string; to: string } {
  const { from, to } = currentPeriod(now, 'month');
  return { month: from.slice(0, 7), from, to };
}

/** The current ISO week (from Monday), month or quarter: `to` is the next period's first day. */
export function currentPeriod(now: Date, period: Period): { from: string; to: string } {
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth();
  switch (period) {
    case 'week': {
      const sinceMonday = (now.getUTCDay() + 6) % 7; // getUTCDay: Sunday 0 … Saturday 6
      const from = addDays(utcDay(now), -sinceMonday);
      return { from, to: addDays(from, 7) };
    }
    case 'month':
      return { from: fromYmd(y, m, 1), to: fromYmd(y, m + 1, 1) };
    case 'quarter': {
      const first = m - (m % 3);
      return { from: fromYmd(y, first, 1), to: fromYmd(y, first + 3, 1) };
    }
  }
}
