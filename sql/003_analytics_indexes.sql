-- Indexes for the analytics API (src/analytics). daily, summary and by-tag read the rollups;
-- events reads usage_events newest first with keyset pagination on (time, event_id).

-- events?provider= and events?model=: walk one account's provider or model newest first
-- without sorting (the unfiltered listing uses usage_events_account_time from 001).
CREATE INDEX usage_events_account_provider_time ON usage_events (account_id, provider, time DESC, event_id DESC);
CREATE INDEX usage_events_account_model_time ON usage_events (account_id, model, time DESC, event_id DESC);
-- events?tag=k:v for a tag the account rarely uses (src/analytics/tag-filter.ts): the account
-- id joins the tags inside the GIN entry, so the lookup yields exactly that account's matches
-- (a GIN on tags alone would hand back every account's). `@account` cannot be a tag key.
CREATE INDEX usage_events_account_tags ON usage_events
  USING gin ((tags || jsonb_object(ARRAY['@account', account_id::text])) jsonb_path_ops);  -- jsonb_object: immutable

-- by-tag reads one tag key of one account over a period; the primary key leads with the day,
-- which would scan every other key of every day in a quarter.
CREATE INDEX usage_tag_daily_account_key_day ON usage_tag_daily (account_id, tag_key, day);
