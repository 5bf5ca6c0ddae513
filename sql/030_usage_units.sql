-- Every billed unit of a call, and the tier that served it (both price the call).
-- units: the units beyond the token columns, named as @pydantic/genai-prices names them
--   (cache_write_1h_tokens, input_audio_tokens, cache_audio_read_tokens, input_image_tokens,
--   cache_image_read_tokens, input_video_tokens, output_audio_tokens, output_image_tokens,
--   output_video_tokens, web_searches, web_fetches), non-zero ones only; NULL when none.
-- service_tier: as the provider reports it (flex, priority, batch, default, standard, …).
ALTER TABLE usage_events ADD COLUMN units jsonb, ADD COLUMN service_tier text;

-- Calls recorded without a price, per account and time: what /analytics/summary counts and
-- `meter pricing reprice` looks for. Few rows, so a small partial index.
CREATE INDEX usage_events_unpriced ON usage_events (account_id, time) WHERE unpriced;
