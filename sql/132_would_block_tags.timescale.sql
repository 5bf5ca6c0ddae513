-- TimescaleDB mode: /analytics/events?tag=k:v reads the tag table (sql/110), which carries every
-- column the events endpoint shows; the shadow budgets' flag (sql/130) is one of them now.
ALTER TABLE usage_event_tags ADD COLUMN would_block jsonb;

CREATE OR REPLACE FUNCTION usage_event_tag_copies(e usage_events) RETURNS SETOF usage_event_tags LANGUAGE sql STABLE AS $$
  SELECT e.account_id, t.key, t.value #>> '{}', e.time, e.event_id, e.key_id, e.provider, e.model,
    e.requested_model, e.status, e.input_tokens, e.output_tokens, e.cached_input_tokens,
    e.cache_write_tokens, e.reasoning_tokens, e.cost, e.price_version, e.usage_source, e.latency_ms,
    e.ttfb_ms, e.stream, e.tags, e.service_tier, e.units, e.would_block
  FROM jsonb_each(e.tags) AS t(key, value) WHERE jsonb_typeof(t.value) = 'string'
$$;
