/**
 * Query parameters of the analytics endpoints (CONTRACT §4), validated with zod. A bad value is
 * a 400 `invalid_parameter` whose message names the parameter and what it accepts; unknown or
 * repeated parameter names are refused too, so a typo (`day=7`) is not silently the default.
 */
import { z } from 'zod';
import { PROVIDER_SLUGS } from '../providers/index.js';
import { DAY_RANGE, isCalendarDay, PERIODS } from '../calendar.js';
import { decodeCursor } from './cursor.js';

export type { ParamResult } from '../http.js';
import type { ParamResult } from '../http.js';

const shown = (v: unknown) => JSON.stringify(typeof v === 'string' && v.length > 60 ? `${v.slice(0, 60)}…` : v);

/** An integer in [min, max] written in plain digits ("1e1", "7.0" and " 7" are refused). */
function intParam(name: string, min: number, max: number, fallback: number) {
  const rule = `${name} must be an integer from ${min} to ${max}`;
  return z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined) return fallback;
      const n = /^\d{1,6}$/.test(v) ? Number(v) : NaN;
      if (n >= min && n <= max) return n;
      ctx.addIssue({ code: 'custom', message: `${rule}, got ${shown(v)}` });
      return z.NEVER;
    });
}

function enumParam<T extends string>(name: string, allowed: readonly T[]) {
  return z.string().refine((v): v is T => (allowed as readonly string[]).includes(v), {
    error: (issue) => `${name} must be one of ${allowed.join(', ')}, got ${shown(issue.input)}`,
  });
}

const TAG_KEY_RE = /^[A-Za-z0-9_.-]{1,64}$/;
const tagKeyRule = 'a tag key: 1-64 characters of A-Z a-z 0-9 _ . -';

/** An ISO date (`2026-03-01`, UTC midnight) or timestamp (`2026-03-01T12:00:00Z`, offsets
 *  allowed, no zone means UTC). Becomes an ISO string with a zone, for `::timestamptz`. */
function instantParam(name: string) {
  const rule = `${name} must be an ISO 8601 date (YYYY-MM-DD) or timestamp (YYYY-MM-DDTHH:MM:SSZ) ${DAY_RANGE}`;
  const re = /^(\d{4}-\d{2}-\d{2})(?:T(\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?)(Z|[+-]\d{2}:\d{2})?)?$/;
  return z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined) return undefined;
      const m = re.exec(v);
      // V8 accepts 2026-02-30 as 2 March: the date part must round-trip.
      // A real day the store accepts (V8 reads 2026-02-30 as 2 March; PostgreSQL refuses year 0).
      const realDay = m && isCalendarDay(m[1]!);
      const iso = m && (m[2] ? `${m[1]}T${m[2]}${m[3] ?? 'Z'}` : `${m[1]}T00:00:00Z`);
      if (!realDay || !iso || Number.isNaN(Date.parse(iso))) {
        ctx.addIssue({ code: 'custom', message: `${rule}, got ${shown(v)}` });
        return z.NEVER;
      }
      return iso;
    });
}

/** An ISO instant in microseconds since the epoch: Date.parse stops at milliseconds, the store
 *  (and the events cursor) does not. Zone offsets are whole minutes, so digits 4-6 are kept. */
function micros(iso: string): bigint {
  const sub = /\.\d{3}(\d{1,3})/.exec(iso)?.[1]?.padEnd(3, '0') ?? '0';
  return BigInt(Date.parse(iso)) * 1000n + BigInt(sub);
}

export const dailyParams = z.strictObject({ days: intParam('days', 1, 90, 30) });

export const summaryParams = z.strictObject({});

export const byTagParams = z.strictObject({
  key: z
    .string({ error: (i) => (i.input === undefined ? 'key is required: the tag key to group by' : undefined) })
    .regex(TAG_KEY_RE, { error: (i) => `key must be ${tagKeyRule}, got ${shown(i.input)}` }),
  period: enumParam('period', PERIODS).default('month'),
});

export const eventsParams = z
  .strictObject({
    limit: intParam('limit', 1, 500, 50),
    cursor: z
      .string()
      .optional()
      .transform((v, ctx) => {
        if (v === undefined) return undefined;
        const c = decodeCursor(v);
        if (!c)
          ctx.addIssue({ code: 'custom', message: 'cursor must be a next_cursor value returned by /analytics/events' });
        return c ?? z.NEVER;
      }),
    provider: enumParam('provider', PROVIDER_SLUGS).optional(),
    model: z
      .string()
      .min(1, { error: 'model must not be empty' })
      .max(256, { error: 'model must be at most 256 characters' })
      .optional(),
    tag: z
      .string()
      .optional()
      .transform((v, ctx) => {
        if (v === undefined) return undefined;
        const i = v.indexOf(':');
        const key = i < 0 ? '' : v.slice(0, i);
        const value = i < 0 ? '' : v.slice(i + 1);
        if (TAG_KEY_RE.test(key) && value.length >= 1 && [...value].length <= 256) return { key, value };
        ctx.addIssue({
          code: 'custom',
          message: `tag must be k:v, where k is ${tagKeyRule} and v 1-256 characters, got ${shown(v)}`,
        });
        return z.NEVER;
      }),
    from: instantParam('from'),
    to: instantParam('to'),
  })
  .superRefine((p, ctx) => {
    if (p.from && p.to && micros(p.from) >= micros(p.to)) {
      ctx.addIssue({
        code: 'custom',
        path: ['to'],
        message: 'to must be later than from (from is inclusive, to exclusive)',
      });
    }
  });

export type DailyParams = z.output<typeof dailyParams>;
export type ByTagParams = z.output<typeof byTagParams>;
export type EventsParams = z.output<typeof eventsParams>;

/** Validates a query string against one endpoint's schema. */
export function parseParams<S extends z.ZodObject>(schema: S, search: URLSearchParams): ParamResult<z.output<S>> {
  const input: Record<string, string> = {};
  for (const [name, value] of search) {
    if (Object.hasOwn(input, name)) return { ok: false, param: name, message: `${name} is given more than once` };
    input[name] = value;
  }
  const parsed = schema.safeParse(input);
  if (parsed.success) return { ok: true, value: parsed.data };
  const issue = parsed.error.issues[0]!;
  if (issue.code === 'unrecognized_keys') {
    const name = issue.keys[0]!;
    const allowed = Object.keys(schema.shape);
    const known = allowed.length
      ? `: this endpoint takes ${allowed.join(', ')}`
      : ': this endpoint takes no parameters';
    return { ok: false, param: name, message: `unknown parameter ${shown(name)}${known}` };
  }
  const param = String(issue.path[0] ?? '');
  return { ok: false, param, message: issue.message };
}
