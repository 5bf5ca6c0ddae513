/** Budgets run per UTC calendar month. */
export interface MonthWindow {
  /** "YYYY-MM" */
  month: string;
  /** First day, "YYYY-MM-DD" (inclusive). */
  from: string;
  /** First day of the next month (exclusive). */
  to: string;
}

const ymd = (d: Date) => d.toISOString().slice(0, 10);

export function monthWindow(now: Date = new Date()): MonthWindow {
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth();
  const from = new Date(Date.UTC(y, m, 1));
  return { month: ymd(from).slice(0, 7), from: ymd(from), to: ymd(new Date(Date.UTC(y, m + 1, 1))) };
}
