-- Deletions that sidecars must see. Caches re-read rows changed since their last refresh
-- (updated_at), which never shows a row that is gone: a deleted key or account kept working
-- until restart. Every deleted service key and account leaves a row here, whoever deleted it
-- (`meter accounts delete` or plain SQL), and the key cache drops what it names within one
-- refresh. Rows are tiny and deletions rare, so they are kept.
CREATE TABLE deletions (
  kind       text NOT NULL CHECK (kind IN ('account', 'key')),
  id         text NOT NULL,
  deleted_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX deletions_deleted_at ON deletions (deleted_at);

CREATE FUNCTION meter_record_deletion() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO deletions (kind, id) VALUES (TG_ARGV[0], OLD.id::text);
  RETURN OLD;
END $$;

CREATE TRIGGER api_keys_deleted AFTER DELETE ON api_keys
  FOR EACH ROW EXECUTE FUNCTION meter_record_deletion('key');
CREATE TRIGGER accounts_deleted AFTER DELETE ON accounts
  FOR EACH ROW EXECUTE FUNCTION meter_record_deletion('account');
