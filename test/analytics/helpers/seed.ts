/**
 * Test seeding: inserts usage events and upserts the matching rollup rows in one statement, the
 * way the batch writer does (DESIGN "Storage"): duplicate event ids are no-ops and only the
 * rows actually inserted reach usage_daily and usage_tag_daily. Every tag key is rolled up.
 */
import { randomUUID } from 'node:crypto';
import type { UsageEvent } from '../../../src/metering/event.js';
import type { Queryable } from '../../../src/store/types.js';

const SEED_SQL = `
WITH input AS (
  SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(
    time timestamptz, event_id uuid, account_id uuid, key_id text, provider text, model text,
    requested_model text, status smallint, input_tokens bigint, output_tokens bigint,
    cached_input_tokens bigint, cache_write_tokens bigint, reasoning_tokens bigint, cost numeric,
    unpriced boolean, price_version text, usage_source text, latency_ms double precision,
    ttfb_ms double precision, stream boolean, tags jsonb)
), ins AS (
  INSERT INTO usage_events (time, event_id, account_id, key_id, provider, model, requested_model, status,
    input_tokens, output_tokens, cached_input_tokens, cache_write_tokens, reasoning_tokens, cost,
    unpriced, price_version, usage_source, latency_ms, ttfb_ms, stream, tags)
  SELECT time, event_id, account_id, key_id, provider, model, requested_model, status,
    input_tokens, output_tokens, cached_input_tokens, cache_write_tokens, reasoning_tokens, cost,
    unpriced, price_version, usage_source, latency_ms, ttfb_ms, stream, tags
  FROM input
  ON CONFLICT DO NOTHING
  RETURNING *
), daily AS (
  INSERT INTO usage_daily AS u (account_id, day, provider, model, spend, requests, input_tokens,
    output_tokens, cached_input_tokens, cache_write_tokens, reasoning_tokens)
  SELECT account_id, (time AT TIME ZONE 'UTC')::date, provider, model, sum(cost), count(*),
    sum(input_tokens), sum(output_tokens), sum(cached_input_tokens), sum(cache_write_tokens), sum(reasoning_tokens)
  FROM ins GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
  ON CONFLICT (account_id, day, provider, model) DO UPDATE SET
    spend = u.spend + excluded.spend, requests = u.requests + excluded.requests,
    input_tokens = u.input_tokens + excluded.input_tokens, output_tokens = u.output_tokens + excluded.output_tokens,
    cached_input_tokens = u.cached_input_tokens + excluded.cached_input_tokens,
    cache_write_tokens = u.cache_write_tokens + excluded.cache_write_tokens,
    reasoning_tokens = u.reasoning_tokens + excluded.reasoning_tokens
  RETURNING 1
), tagged AS (
  INSERT INTO usage_tag_daily AS t (account_id, day, tag_key, tag_value, spend, requests)
  SELECT ins.account_id, (ins.time AT TIME ZONE 'UTC')::date, kv.key, kv.value, sum(ins.cost), count(*)
  FROM ins, jsonb_each_text(ins.tags) AS kv GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
  ON CONFLICT (account_id, day, tag_key, tag_value) DO UPDATE SET
    spend = t.spend + excluded.spend, requests = t.requests + excluded.requests
  RETURNING 1
)
SELECT (SELECT count(*) FROM ins)::int AS inserted, (SELECT count(*) FROM daily)::int AS d, (SELECT count(*) FROM tagged)::int AS t`;

/** Writes events (in chunks) with their rollups; returns how many were new. */
export async function seedEvents(db: Queryable, events: UsageEvent[]): Promise<number> {
  let inserted = 0;
  for (let i = 0; i < events.length; i += 1000) {
    const rows = events.slice(i, i + 1000).map((e) => ({
      time: e.time, event_id: e.id, account_id: e.accountId, key_id: e.keyId, provider: e.provider,
      model: e.model, requested_model: e.requestedModel, status: e.status, input_tokens: e.inputTokens,
      output_tokens: e.outputTokens, cached_input_tokens: e.cachedInputTokens, cache_write_tokens: e.cacheWriteTokens,
      reasoning_tokens: e.reasoningTokens, cost: e.cost, unpriced: e.unpriced, price_version: e.priceVersion,
      usage_source: e.usageSource, latency_ms: e.latencyMs, ttfb_ms: e.ttfbMs, stream: e.stream, tags: e.tags,
    }));
    const [r] = await db.query<{ inserted: number }>(SEED_SQL, [JSON.stringify(rows)]);
    inserted += r!.inserted;
  }
  return inserted;
}

/** A complete event with plausible defaults. */
export function makeEvent(over: Partial<UsageEvent> & Pick<UsageEvent, 'accountId' | 'time'>): UsageEvent {
  return {
    id: randomUUID(),
    keyId: '000000000000',
    provider: 'openai',
    model: 'gpt-4o-mini',
    requestedModel: 'gpt-4o-mini',
    status: 200,
    inputTokens: 100,
    outputTokens: 20,
    cachedInputTokens: 0,
    cacheWriteTokens: 0,
    reasoningTokens: 0,
    cost: '0.00002700',
    unpriced: false,
    priceVersion: 'genai-prices@0.1.8',
    usageSource: 'provider',
    latencyMs: 123.5,
    ttfbMs: 45.25,
    stream: false,
    tags: {},
    providerCostTicks: null,
    ...over,
  };
}
