-- Usage a provider reported out of range (issue: 1e300 tokens was dead-lettered, 2^63-1024
-- overflowed the day's rollup and every later event of that account, day and model with it).
-- Counts are clamped to a billion per field before they reach SQL (src/providers/common.ts);
-- such an event keeps which fields were clamped and the raw figures here. NULL for every
-- normal event.
ALTER TABLE usage_events ADD COLUMN usage_raw jsonb;

-- Rollup tables (plain PostgreSQL, embedded) add up without bound: NUMERIC cannot overflow, so
-- no event can make a day's row unwritable. (TimescaleDB's continuous aggregates sum into
-- NUMERIC themselves; their result types are those of sql/020.)
DO $$
BEGIN
  IF (SELECT relkind FROM pg_class WHERE oid = to_regclass('usage_daily')) = 'r' THEN
    ALTER TABLE usage_daily
      ALTER COLUMN spend TYPE numeric,
      ALTER COLUMN input_tokens TYPE numeric,
      ALTER COLUMN output_tokens TYPE numeric,
      ALTER COLUMN cached_input_tokens TYPE numeric,
      ALTER COLUMN cache_write_tokens TYPE numeric,
      ALTER COLUMN reasoning_tokens TYPE numeric;
    ALTER TABLE usage_tag_daily ALTER COLUMN spend TYPE numeric;
  END IF;
END $$;
