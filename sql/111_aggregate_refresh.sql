-- One refresh of the continuous aggregates per interval for a whole fleet (TimescaleDB mode;
-- src/store/timescale/refresher.ts). Every sidecar checks often; the one whose UPDATE moves
-- started_at takes the refresh, the others find it recent and skip. Created in every mode, so
-- a plain database converted later has it already.
CREATE TABLE aggregate_refresh (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  -- the last refresh claimed (by the database's clock: one clock for the whole fleet)
  started_at timestamptz NOT NULL DEFAULT '-infinity',
  -- when the last refresh that succeeded was claimed
  refreshed_at timestamptz NOT NULL DEFAULT '-infinity'
);
INSERT INTO aggregate_refresh DEFAULT VALUES;
