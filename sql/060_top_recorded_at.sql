-- meter top follows newly written events with a cursor. `time` is when a call ARRIVED and an
-- event is written only when the call ends (seconds to minutes later for LLM calls), so a cursor
-- on time would skip every call slower than the poll. recorded_at is when the row was written
-- (clock_timestamp(): per row, on the database's one clock for every sidecar of a fleet).
-- Rows written before this migration keep NULL: no default is applied to them (no table rewrite).
ALTER TABLE usage_events ADD COLUMN recorded_at timestamptz;
ALTER TABLE usage_events ALTER COLUMN recorded_at SET DEFAULT clock_timestamp();
CREATE INDEX usage_events_account_recorded ON usage_events (account_id, recorded_at);
