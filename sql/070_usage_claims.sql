-- Usage that can reach the proxy more than once: batch results, downloaded again and again
-- (README "Batch results"). Each such event carries a claim key (`anthropic:<batch id>:<model>`,
-- `openai:<file id>:<model>`); the batch insert (src/store/event-batch.ts) claims the key and
-- charges the event in ONE statement, and an event whose key another event of the account holds
-- is recorded as a call that used nothing. So a replayed batch, a second download and two
-- sidecars downloading the same file all charge it once.
--
-- Claims outlive raw events: they are kept as long as the account's rollups (the charge itself),
-- so a download after retention deleted the events still charges nothing (src/plans/retention.ts).
-- claimed_at is the claiming event's time.
CREATE TABLE usage_claims (
  account_id uuid NOT NULL,
  claim      text NOT NULL CHECK (length(claim) <= 256),
  event_id   uuid NOT NULL,
  claimed_at timestamptz NOT NULL,
  PRIMARY KEY (account_id, claim)
);
CREATE INDEX usage_claims_claimed_at ON usage_claims (claimed_at);
