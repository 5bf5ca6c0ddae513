/**
 * Reconciliation's reads and writes: meter's figures (from the daily rollups, plus the raw
 * events' usage_source breakdown), mappings, runs and the stored daily results.
 */
import { MeterError } from '../errors.js';
import type { Queryable } from '../store/types.js';
import type { Mapping, MappingKind, ReconcileProvider } from './types.js';

/** Meter's figures of one day and model as the store gives them (decimal text). */
export interface MeterRow {
  date: string;
  model: string;
  requests: string;
  input_tokens: string;
  cached_input_tokens: string;
  output_tokens: string;
  cost: string;
  sources: { source: string; calls: string; cost: string; priority_cost: string; web_searches: string }[];
}

/**
 * Totals come from usage_daily (kept 13 months, whatever the raw retention); the calls by
 * usage_source from the raw events where they are still kept. `requests` counts calls that
 * reached the model: provider errors (usage_source none) are not requests to the provider.
 */
export async function meterFigures(
  db: Queryable,
  provider: ReconcileProvider,
  from: string,
  to: string,
  accountId?: string,
): Promise<MeterRow[]> {
  const scope = accountId ? 'AND account_id = $4::uuid' : '';
  const params = accountId ? [provider, from, to, accountId] : [provider, from, to];
  const totals = await db.query<Omit<MeterRow, 'sources'>>(
    `SELECT day::text AS date, model, sum(requests)::text AS requests, sum(input_tokens)::text AS input_tokens,
            sum(cached_input_tokens)::text AS cached_input_tokens, sum(output_tokens)::text AS output_tokens,
            sum(spend)::text AS cost
       FROM usage_daily
      WHERE provider = $1 AND day >= $2::date AND day < $3::date ${scope}
      GROUP BY day, model`,
    params,
  );
  // The parts the provider's cost report leaves out or bills apart (Anthropic's Priority Tier;
  // web searches, whose count is priced apart by the caller).
  const sources = await db.query<{ date: string; model: string } & MeterRow['sources'][number]>(
    `SELECT (time AT TIME ZONE 'UTC')::date::text AS date, model, usage_source AS source,
            count(*)::text AS calls, sum(cost)::text AS cost,
            coalesce(sum(cost) FILTER (WHERE service_tier = 'priority'), 0)::text AS priority_cost,
            coalesce(sum(CASE WHEN jsonb_typeof(units -> 'web_searches') = 'number'
              AND service_tier IS DISTINCT FROM 'priority' THEN (units ->> 'web_searches')::numeric END), 0)::text
              AS web_searches
       FROM usage_events
      WHERE provider = $1 AND time >= ($2::date)::timestamp AT TIME ZONE 'UTC'
        AND time < ($3::date)::timestamp AT TIME ZONE 'UTC' ${scope}
      GROUP BY 1, 2, 3`,
    params,
  );
  const byKey = new Map(totals.map((t) => [`${t.date}\u0000${t.model}`, { ...t, sources: [] as MeterRow['sources'] }]));
  for (const s of sources)
    byKey.get(`${s.date}\u0000${s.model}`)?.sources.push({
      source: s.source,
      calls: s.calls,
      cost: s.cost,
      priority_cost: s.priority_cost,
      web_searches: s.web_searches,
    });
  return [...byKey.values()];
}

export async function listMappings(db: Queryable, provider?: ReconcileProvider): Promise<Mapping[]> {
  return db.query<Mapping>(
    `SELECT m.provider, m.kind, m.external_id, m.account_id::text AS account_id, a.name AS account
       FROM reconcile_mappings m JOIN accounts a ON a.id = m.account_id
      WHERE $1::text IS NULL OR m.provider = $1
      ORDER BY m.provider, a.name, m.kind, m.external_id`,
    [provider ?? null],
  );
}

/** Ties a provider id to an account (replacing an earlier tie of the same id). */
export async function addMapping(
  db: Queryable,
  provider: ReconcileProvider,
  kind: MappingKind,
  externalId: string,
  account: string,
): Promise<Mapping> {
  const [row] = await db.query<Mapping>(
    `WITH a AS (SELECT id, name FROM accounts WHERE name = $4)
     INSERT INTO reconcile_mappings (provider, kind, external_id, account_id)
     SELECT $1, $2, $3, a.id FROM a
     ON CONFLICT (provider, kind, external_id) DO UPDATE SET account_id = EXCLUDED.account_id, created_at = now()
     RETURNING provider, kind, external_id, account_id::text AS account_id, $4::text AS account`,
    [provider, kind, externalId, account],
  );
  if (!row) throw new MappingError(`--account "${account}": no such account (see \`meter accounts list\`)`);
  return row;
}

export async function removeMapping(
  db: Queryable,
  provider: ReconcileProvider,
  kind: MappingKind,
  externalId: string,
): Promise<boolean> {
  const rows = await db.query(
    'DELETE FROM reconcile_mappings WHERE provider = $1 AND kind = $2 AND external_id = $3 RETURNING 1',
    [provider, kind, externalId],
  );
  return rows.length > 0;
}

export class MappingError extends MeterError {
  override name = 'MappingError';
}

/** One stored daily result (decimal text; provider figures null where the provider has none). */
export interface ResultRow {
  date: string;
  model: string;
  provider_requests: string | null;
  provider_input_tokens: string;
  provider_cached_input_tokens: string;
  provider_output_tokens: string;
  provider_cost: string | null;
  meter_requests: string;
  meter_input_tokens: string;
  meter_cached_input_tokens: string;
  meter_output_tokens: string;
  meter_cost: string;
  findings: unknown[];
}

export interface SaveRun {
  provider: ReconcileProvider;
  /** '' the organisation, else the account's id. */
  scope: string;
  from: string;
  to: string;
  startedAt: string;
  rows: ResultRow[];
}

/** Stores a complete run's results in one transaction, replacing the scope's earlier results
 *  for the days it covers (a model that is gone is gone). */
export async function saveRun(
  db: { transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> },
  run: SaveRun,
): Promise<number> {
  return db.transaction(async (tx) => {
    const [{ id }] = (await tx.query<{ id: string }>(
      `INSERT INTO reconcile_runs (provider, scope, from_day, to_day, started_at, finished_at, status)
       VALUES ($1, $2, $3::date, $4::date, $5::timestamptz, now(), 'complete') RETURNING id::text AS id`,
      [run.provider, run.scope, run.from, run.to, run.startedAt],
    )) as [{ id: string }];
    await tx.query(
      'DELETE FROM reconcile_results WHERE provider = $1 AND scope = $2 AND day >= $3::date AND day < $4::date',
      [run.provider, run.scope, run.from, run.to],
    );
    if (run.rows.length > 0)
      await tx.query(
        `INSERT INTO reconcile_results (provider, scope, day, model, run_id, provider_requests, provider_input_tokens,
           provider_cached_input_tokens, provider_output_tokens, provider_cost, meter_requests, meter_input_tokens,
           meter_cached_input_tokens, meter_output_tokens, meter_cost, findings)
         SELECT $1, $2, r.date::date, r.model, $3::bigint, r.provider_requests::bigint, r.provider_input_tokens::bigint,
           r.provider_cached_input_tokens::bigint, r.provider_output_tokens::bigint, r.provider_cost::numeric,
           r.meter_requests::bigint, r.meter_input_tokens::bigint, r.meter_cached_input_tokens::bigint,
           r.meter_output_tokens::bigint, r.meter_cost::numeric, r.findings
           FROM jsonb_to_recordset($4::jsonb) AS r(date text, model text, provider_requests text, provider_input_tokens text,
             provider_cached_input_tokens text, provider_output_tokens text, provider_cost text, meter_requests text,
             meter_input_tokens text, meter_cached_input_tokens text, meter_output_tokens text, meter_cost text, findings jsonb)`,
        [run.provider, run.scope, id, JSON.stringify(run.rows)],
      );
    return Number(id);
  });
}

/** Records a run that failed: no results are written or replaced. */
export async function recordFailedRun(
  db: Queryable,
  run: { provider: ReconcileProvider; scope: string; from: string; to: string; startedAt: string; error: string },
): Promise<void> {
  await db.query(
    `INSERT INTO reconcile_runs (provider, scope, from_day, to_day, started_at, finished_at, status, error)
     VALUES ($1, $2, $3::date, $4::date, $5::timestamptz, now(), 'failed', $6)`,
    [run.provider, run.scope, run.from, run.to, run.startedAt, run.error.slice(0, 1000)],
  );
}

/** The stored daily results of one provider and scope over [from, to). */
export async function readResults(
  db: Queryable,
  provider: ReconcileProvider,
  scope: string,
  from: string,
  to: string,
): Promise<ResultRow[]> {
  return db.query<ResultRow>(
    `SELECT day::text AS date, model, provider_requests::text AS provider_requests,
            provider_input_tokens::text AS provider_input_tokens, provider_cached_input_tokens::text AS provider_cached_input_tokens,
            provider_output_tokens::text AS provider_output_tokens, provider_cost::text AS provider_cost,
            meter_requests::text AS meter_requests, meter_input_tokens::text AS meter_input_tokens,
            meter_cached_input_tokens::text AS meter_cached_input_tokens, meter_output_tokens::text AS meter_output_tokens,
            meter_cost::text AS meter_cost, findings
       FROM reconcile_results
      WHERE provider = $1 AND scope = $2 AND day >= $3::date AND day < $4::date
      ORDER BY day, model`,
    [provider, scope, from, to],
  );
}

/** When the last complete run of a provider and scope started, or null. */
export async function lastCompleteRun(
  db: Queryable,
  provider: ReconcileProvider,
  scope: string,
): Promise<string | null> {
  const [row] = await db.query<{ at: string | null }>(
    `SELECT max(started_at)::text AS at FROM reconcile_runs WHERE provider = $1 AND scope = $2 AND status = 'complete'`,
    [provider, scope],
  );
  return row?.at ?? null;
}
