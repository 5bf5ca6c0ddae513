/**
 * /analytics/events: raw usage events, newest first, keyset-paginated on (time, event_id).
 * A page starts strictly after the previous page's last row, so walking every page while new
 * events arrive never repeats an event nor skips one that existed when the walk began (new
 * calls are newer than any cursor; an insert never shifts an offset because there is none).
 */
import type { Queryable } from '../store/types.js';
import { encodeCursor } from './cursor.js';
import { stringTags } from '../tags.js';
import { isoTime } from '../calendar.js';
import { integer, money, type JsonValue } from '../money.js';
import type { EventsParams } from './params.js';
import { ACCOUNT_TAG_KEY, ACCOUNT_TAGS_EXPR, chooseTagStrategy } from './tag-filter.js';

interface EventRow {
  event_id: string;
  time_utc: string;
  provider: string;
  model: string;
  status: number;
  input_tokens: string;
  output_tokens: string;
  cached_input_tokens: string;
  cache_write_tokens: string;
  reasoning_tokens: string;
  cost: string;
  usage_source: string;
  latency_ms: number;
  ttfb_ms: number | null;
  stream: boolean;
  tags: Record<string, unknown>;
  key_id: string;
  requested_model: string | null;
  price_version: string;
  service_tier: string | null;
  units: Record<string, number> | null;
  would_block: string[] | null;
}

// Microseconds as stored: the cursor must name the exact row (see cursor.ts). Not aliased
// `time`: ORDER BY time would then sort by this text instead of walking the index.
const COLUMNS = `event_id, to_char(time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS time_utc,
  provider, model, status, input_tokens, output_tokens, cached_input_tokens, cache_write_tokens,
  reasoning_tokens, cost::text AS cost, usage_source, latency_ms, ttfb_ms, stream, tags, key_id,
  requested_model, price_version, service_tier, units, would_block`;

/** Per-plan raw retention as a visibility limit (TimescaleDB mode, where raw chunks are kept
 *  for the longest plan's retention): nothing older than the account's plan keeps, unless the
 *  plan changed more recently than that (as retention spares a fresh downgrade in plain mode). */
const visibleSince = (now: string, account: string) => `time >= (
  SELECT CASE WHEN a.plan_changed_at <= ${now}::timestamptz - p.raw_retention_days * interval '1 day'
    THEN ${now}::timestamptz - p.raw_retention_days * interval '1 day' ELSE '-infinity' END
  FROM accounts a JOIN plans p ON p.name = a.plan WHERE a.id = ${account})`;

const order = (limit: number) => `ORDER BY time DESC, event_id DESC LIMIT ${limit}`;

const DAY = 86_400_000;
/**
 * TimescaleDB mode reads usage_events in windows of time, newest first: the last day, the 6
 * before it, the 23 before those, then the rest. A bound the planner sees as a constant keeps
 * the other chunks out of the plan; planning every 1-day chunk (91 at the longest retention,
 * 83 compressed) took ~40 ms, a first page ~1 ms. A window that fills the page ends the read.
 */
const WINDOW_DAYS = [1, 7, 30];

export async function listEvents(
  db: Queryable,
  accountId: string,
  p: EventsParams,
  opts: { retentionVisibility?: boolean; timescale?: boolean; now?: Date } = {},
): Promise<JsonValue> {
  const now = opts.now ?? new Date();
  // The tag table answers any tag at the cost of one index range: no estimate first.
  const strategy =
    p.tag && !opts.timescale
      ? await chooseTagStrategy(
          db,
          accountId,
          p.tag,
          { fromDay: p.from && utcDayOf(p.from), toDay: dayOfUpperBound(p) },
          p.limit,
        )
      : undefined;
  if (strategy === 'none') return { events: [], next_cursor: null };

  const params: unknown[] = [];
  const arg = (v: unknown) => `$${params.push(v)}`;
  // Conditions on time alone, the same on usage_events and usage_event_tags.
  const within: string[] = [];
  if (opts.retentionVisibility) within.push(visibleSince(arg(now.toISOString()), `${arg(accountId)}::uuid`));
  if (p.from) within.push(`time >= ${arg(p.from)}::timestamptz`);
  if (p.to) within.push(`time < ${arg(p.to)}::timestamptz`);
  if (p.cursor) {
    within.push(`(time, event_id) < (${arg(p.cursor.time)}::timestamptz, ${arg(p.cursor.eventId)}::uuid)`);
    // Implied by the row comparison, but only a plain bound excludes the newer chunks.
    if (opts.timescale) within.push(`time <= ${arg(p.cursor.time)}::timestamptz`);
  }

  let rows: EventRow[];
  if (p.tag && opts.timescale) {
    // TimescaleDB mode: compressed chunks have no GIN index, so tagged events are read from
    // their copy under the tag (sql/110): one index range, newest first, compressed or not.
    const where = [`account_id = ${arg(accountId)}`, `tag_key = ${arg(p.tag.key)}`, `tag_value = ${arg(p.tag.value)}`];
    if (p.provider) where.push(`provider = ${arg(p.provider)}`);
    if (p.model) where.push(`model = ${arg(p.model)}`);
    // Its 7-day chunks outlive the raw horizon (where usage_events' chunks are dropped) by days.
    where.push(
      `time >= ${arg(now.toISOString())}::timestamptz - (SELECT max(raw_retention_days) FROM plans) * interval '1 day'`,
    );
    rows = await db.query<EventRow>(
      `SELECT ${COLUMNS} FROM usage_event_tags WHERE ${[...where, ...within].join(' AND ')} ${order(p.limit + 1)}`,
      params,
    );
  } else if (opts.timescale) {
    const where = [`account_id = ${arg(accountId)}`, ...within];
    if (p.provider) where.push(`provider = ${arg(p.provider)}`);
    if (p.model) where.push(`model = ${arg(p.model)}`);
    rows = await inWindows(db, `SELECT ${COLUMNS} FROM usage_events WHERE ${where.join(' AND ')}`, params, p, now);
  } else {
    const where: string[] = [];
    if (p.tag && strategy === 'lookup') {
      // Only the GIN expression index answers this; the account is part of the lookup.
      const wanted = { [ACCOUNT_TAG_KEY]: accountId.toLowerCase(), [p.tag.key]: p.tag.value };
      where.push(`${ACCOUNT_TAGS_EXPR} @> ${arg(JSON.stringify(wanted))}::jsonb`);
    } else {
      where.push(`account_id = ${arg(accountId)}`);
      if (p.tag) where.push(`tags @> ${arg(JSON.stringify({ [p.tag.key]: p.tag.value }))}::jsonb`);
    }
    if (p.provider) where.push(`provider = ${arg(p.provider)}`);
    if (p.model) where.push(`model = ${arg(p.model)}`);
    const filter = `FROM usage_events WHERE ${[...where, ...within].join(' AND ')}`;
    // One row more than asked tells whether another page exists. A lookup is materialised first
    // so the planner cannot trade the few matches for a walk of the whole table in time order.
    const sql =
      strategy === 'lookup'
        ? `WITH matches AS MATERIALIZED (SELECT * ${filter}) SELECT ${COLUMNS} FROM matches ${order(p.limit + 1)}`
        : `SELECT ${COLUMNS} ${filter} ${order(p.limit + 1)}`;
    rows = await db.query<EventRow>(sql, params);
  }
  const page = rows.slice(0, p.limit);
  const last = page[page.length - 1];
  const more = rows.length > p.limit && last !== undefined;
  return {
    events: page.map(toEvent),
    next_cursor: more ? encodeCursor({ time: last.time_utc, eventId: last.event_id }) : null,
  };
}

/** `select` (its parameters in `params`) run over the windows of WINDOW_DAYS back from the
 *  page's upper end (now, `to` or the cursor), until limit + 1 rows or `from` is reached. The
 *  windows are disjoint and newest first, so their rows in turn are the page's order. */
async function inWindows(
  db: Queryable,
  select: string,
  params: unknown[],
  p: EventsParams,
  now: Date,
): Promise<EventRow[]> {
  const top = Math.min(...[now.toISOString(), p.to, p.cursor?.time].flatMap((t) => (t ? [Date.parse(t)] : [])));
  const floor = p.from ? Date.parse(p.from) : -Infinity;
  const rows: EventRow[] = [];
  let upper: string | undefined;
  for (const days of [...WINDOW_DAYS, Infinity]) {
    const lowerMs = top - days * DAY;
    const last = !(lowerMs > floor); // also true for the unbounded last window
    const lower = last ? undefined : new Date(lowerMs).toISOString();
    const args = [...params];
    const arg = (v: unknown) => `$${args.push(v)}`;
    const bounds = [
      ...(lower ? [`time >= ${arg(lower)}::timestamptz`] : []),
      ...(upper ? [`time < ${arg(upper)}::timestamptz`] : []),
    ];
    const sql = `${select}${bounds.map((b) => ` AND ${b}`).join('')} ${order(p.limit + 1 - rows.length)}`;
    rows.push(...(await db.query<EventRow>(sql, args)));
    if (last || rows.length > p.limit) return rows;
    upper = lower;
  }
  return rows;
}

/** The UTC day of an ISO instant that may carry an offset. */
const utcDayOf = (iso: string) => new Date(Date.parse(iso)).toISOString().slice(0, 10);

/** The last UTC day the page can reach: the earlier of `to` and the cursor. */
function dayOfUpperBound(p: EventsParams): string | undefined {
  const ends = [p.to, p.cursor?.time].filter((t): t is string => t !== undefined);
  return ends.length ? utcDayOf(ends.reduce((a, b) => (Date.parse(a) <= Date.parse(b) ? a : b))) : undefined;
}

/** The fields of CONTRACT §4 (plus `service_tier`, `units` and a shadow budget's `would_block`), tags limited to the string pairs the caller sent. */
function toEvent(r: EventRow): JsonValue {
  const tags = stringTags(r.tags);
  return {
    id: r.event_id,
    time: isoTime(r.time_utc),
    provider: r.provider,
    model: r.model,
    status: r.status,
    input_tokens: integer(r.input_tokens),
    output_tokens: integer(r.output_tokens),
    cached_input_tokens: integer(r.cached_input_tokens),
    cache_write_tokens: integer(r.cache_write_tokens),
    reasoning_tokens: integer(r.reasoning_tokens),
    cost: money(r.cost),
    usage_source: r.usage_source,
    latency_ms: r.latency_ms,
    ttfb_ms: r.ttfb_ms,
    stream: r.stream,
    tags,
    key_id: r.key_id,
    requested_model: r.requested_model,
    price_version: r.price_version,
    service_tier: r.service_tier,
    units: r.units ?? {},
    // The shadow budgets that would have refused the call (CONTRACT §6); absent otherwise.
    ...(r.would_block?.length ? { would_block: r.would_block } : {}),
  };
}
