const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };
const DURATION = /^(\d{1,9})([smhd])$/;
const MAX_SECONDS = 365 * 86_400;

export const DURATION_FORMS = 'a number followed by s, m, h or d (30s, 15m, 1h, 2d), or 0 for none';

/** `30s`, `15m`, `1h`, `2d` or `0` → seconds; throws a message naming the allowed forms. */
export function parseDuration(value: string, what = 'duration'): number {
  const v = value.trim();
  if (v === '0') return 0;
  const m = DURATION.exec(v);
  const seconds = m ? Number(m[1]) * UNIT_SECONDS[m[2]!]! : NaN;
  if (!Number.isFinite(seconds))
    throw new Error(`invalid ${what} ${JSON.stringify(value)}: expected ${DURATION_FORMS}`);
  if (seconds > MAX_SECONDS) throw new Error(`invalid ${what} ${JSON.stringify(value)}: at most 365d`);
  return seconds;
}
