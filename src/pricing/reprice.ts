/**
 * `meter pricing reprice --since <date>`: once a price for a model arrives (a price data update,
 * a METER_PRICES_FILE entry), the calls recorded without one are priced from their stored units
 * (token columns, `units`, `service_tier`) at the time each call arrived. Each page of events is
 * one statement: the events get their cost, price_version and `unpriced = false`, and the rollups
 * the same amounts (an unpriced event was counted at cost 0, so its cost is what they lack). With
 * TimescaleDB the rollups are continuous aggregates: the days touched are refreshed instead.
 * Statements only (no transaction), so it also runs through a daemon's admin API.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { coefAt, formatFixed, parseDecimal } from './decimal.js';
import type { Pricer } from './pricer.js';
import { COST_DECIMALS } from './cost.js';
import { usageFromStored, type StoredUsage } from '../store/event-units.js';
import type { ProviderSlug } from '../providers/types.js';
import { aggregateNames } from '../store/timescale/maintenance.js';
import type { Db } from '../store/types.js';

export interface RepriceChange {
  provider: string;
  model: string;
  /** The catalogue model or prices-file key that priced them. */
  priced_as: string;
  events: number;
  /** USD added to spend, exact. */
  cost: string;
}

export interface RepriceReport {
  since: string;
  price_version: string;
  /** Unpriced events looked at. */
  examined: number;
  repriced: number;
  /** Still without a price (their models are listed). */
  still_unpriced: number;
  unpriced_models: { provider: string; model: string; events: number }[];
  cost_added: string;
  changes: RepriceChange[];
  /** UTC days whose rollups changed. */
  days: string[];
}

interface Row extends StoredUsage {
  time: string;
  event_id: string;
  provider: string;
  model: string;
  requested_model: string | null;
}

const PAGE = 500;

// Every unpriced event was counted at cost 0, so each rollup lacks exactly the new cost.
const INPUT = `input AS (
  SELECT * FROM unnest($1::timestamptz[], $2::uuid[], $3::numeric[], $4::text[]) AS t(time, event_id, cost, price_version)
), upd AS (
  UPDATE usage_events e SET cost = i.cost, unpriced = false, price_version = i.price_version
  FROM input i WHERE e.time = i.time AND e.event_id = i.event_id AND e.unpriced
  RETURNING e.event_id, e.account_id, (e.time AT TIME ZONE 'UTC')::date AS day, e.provider, e.model, e.cost, e.tags
)`;

const ROLLUPS = `daily AS (
  UPDATE usage_daily d SET spend = d.spend + x.cost
  FROM (SELECT account_id, day, provider, model, sum(cost) AS cost FROM upd GROUP BY 1, 2, 3, 4) x
  WHERE d.account_id = x.account_id AND d.day = x.day AND d.provider = x.provider AND d.model = x.model
  RETURNING 1
), tag_groups AS (
  SELECT u.account_id, u.day, t.key, t.value, sum(u.cost) AS cost
  FROM upd u CROSS JOIN LATERAL jsonb_each_text(u.tags) AS t(key, value) GROUP BY 1, 2, 3, 4
), tag_rows AS (
  -- A value past the writer's per-day cap was rolled up into the overflow row ''.
  SELECT g.account_id, g.day, g.key, CASE WHEN EXISTS (
      SELECT 1 FROM usage_tag_daily x WHERE x.account_id = g.account_id AND x.day = g.day AND x.tag_key = g.key AND x.tag_value = g.value)
    THEN g.value ELSE '' END AS value, g.cost
  FROM tag_groups g
), tags AS (
  UPDATE usage_tag_daily x SET spend = x.spend + r.cost
  FROM (SELECT account_id, day, key, value, sum(cost) AS cost FROM tag_rows GROUP BY 1, 2, 3, 4) r
  WHERE x.account_id = r.account_id AND x.day = r.day AND x.tag_key = r.key AND x.tag_value = r.value
  RETURNING 1
)`;

/** Answers the ids it priced (`e`) and the days it touched (`d`). The rollup updates run
 *  whether or not the answer reads them (data-modifying CTEs always run to completion). */
function updateSql(kind: Db['kind']): string {
  const answer = `SELECT 'e' AS k, event_id::text AS v FROM upd
  UNION ALL SELECT DISTINCT 'd', to_char(day, 'YYYY-MM-DD') FROM upd`;
  return kind === 'timescale' ? `WITH ${INPUT} ${answer}` : `WITH ${INPUT}, ${ROLLUPS} ${answer}`;
}

const toUnits = (cost: string) => coefAt(parseDecimal(cost)!, COST_DECIMALS);

export interface RepriceOptions {
  /** Told about every model whose calls got a price (the CLI logs it). */
  onChange?: (change: RepriceChange) => void;
  pageSize?: number;
}

export async function repriceUnpriced(
  db: Db,
  pricer: Pricer,
  since: Date,
  opts: RepriceOptions = {},
): Promise<RepriceReport> {
  const pageSize = opts.pageSize ?? PAGE;
  const changes = new Map<string, RepriceChange & { units: bigint }>();
  const unpriced = new Map<string, { provider: string; model: string; events: number }>();
  const days = new Set<string>();
  let examined = 0;
  let repriced = 0;
  let cursor: [string, string] | null = null;
  for (;;) {
    const params: unknown[] = [since.toISOString(), pageSize];
    let after = '';
    if (cursor) {
      params.push(cursor[0], cursor[1]);
      after = 'AND (time, event_id) > ($3::timestamptz, $4::uuid)';
    }
    const rows = await db.query<Row>(
      `SELECT to_char(time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS time, event_id::text AS event_id,
         provider, model, requested_model, input_tokens, output_tokens, cached_input_tokens, cache_write_tokens,
         reasoning_tokens, units, service_tier
       FROM usage_events WHERE unpriced AND time >= $1::timestamptz ${after}
       ORDER BY time, event_id LIMIT $2`,
      params,
    );
    if (rows.length === 0) break;
    cursor = [rows[rows.length - 1]!.time, rows[rows.length - 1]!.event_id];
    examined += rows.length;

    const cols: [string[], string[], string[], string[]] = [[], [], [], []];
    const priced: { row: Row; cost: string; as: string }[] = [];
    for (const row of rows) {
      const r = pricer.cost({
        provider: row.provider as ProviderSlug,
        model: row.model,
        requestedModel: row.requested_model,
        usage: usageFromStored(row),
        time: new Date(row.time),
      });
      if (r.unpriced) {
        const key = `${row.provider}\u0000${row.model}`;
        const u = unpriced.get(key) ?? { provider: row.provider, model: row.model, events: 0 };
        u.events++;
        unpriced.set(key, u);
        continue;
      }
      cols[0].push(row.time);
      cols[1].push(row.event_id);
      cols[2].push(r.cost);
      cols[3].push(r.priceVersion);
      priced.push({ row, cost: r.cost, as: r.matchedModel ?? row.model });
    }
    if (priced.length === 0) continue;

    const result = await withDeadlockRetry(() => db.query<{ k: 'e' | 'd'; v: string }>(updateSql(db.kind), cols));
    // Another reprice running at the same time may have priced some first: count only ours.
    const mine = new Set<string>();
    for (const r of result) {
      if (r.k === 'd') days.add(r.v);
      else mine.add(r.v);
    }
    repriced += mine.size;
    for (const p of priced) {
      if (!mine.has(p.row.event_id)) continue;
      const key = `${p.row.provider}\u0000${p.row.model}`;
      const c = changes.get(key) ?? {
        provider: p.row.provider,
        model: p.row.model,
        priced_as: p.as,
        events: 0,
        cost: '',
        units: 0n,
      };
      c.events++;
      c.units += toUnits(p.cost);
      changes.set(key, c);
    }
  }
  if (db.kind === 'timescale') await refreshDays(db, [...days]);

  const list = [...changes.values()].map(({ units, ...c }) => ({ ...c, cost: formatFixed(units, COST_DECIMALS) }));
  for (const c of list) opts.onChange?.(c);
  const total = [...changes.values()].reduce((s, c) => s + c.units, 0n);
  return {
    since: since.toISOString(),
    price_version: pricer.priceVersion,
    examined,
    repriced,
    still_unpriced: [...unpriced.values()].reduce((n, u) => n + u.events, 0),
    unpriced_models: [...unpriced.values()],
    cost_added: formatFixed(total, COST_DECIMALS),
    changes: list,
    days: [...days].sort(),
  };
}

/** Continuous aggregates recompute whole days from the raw rows: each touched day, one CALL
 *  per aggregate, each its own statement outside any transaction. */
async function refreshDays(db: Db, days: string[]): Promise<void> {
  const names = await aggregateNames(db);
  for (const day of days.sort()) {
    const start = `${day}T00:00:00Z`;
    const end = new Date(Date.parse(start) + 86_400_000).toISOString();
    for (const name of names) {
      await db.query(`CALL refresh_continuous_aggregate('${name.replace(/'/g, "''")}', '${start}', '${end}')`);
    }
  }
}

async function withDeadlockRetry<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const code = (err as { code?: string }).code;
      if ((code !== '40P01' && code !== '40001') || attempt >= 5) throw err;
      await delay(20 * attempt);
    }
  }
}
