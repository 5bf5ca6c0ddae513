-- When an account's plan last changed: retention never deletes data of an account sooner than
-- its new plan has been in force for that plan's retention (a downgrade deletes nothing early).
ALTER TABLE accounts ADD COLUMN plan_changed_at timestamptz NOT NULL DEFAULT now();
UPDATE accounts SET plan_changed_at = created_at;

CREATE FUNCTION meter_plan_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.plan IS DISTINCT FROM OLD.plan THEN
    NEW.plan_changed_at := now();
    NEW.updated_at := now();
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER accounts_plan_changed BEFORE UPDATE OF plan ON accounts
  FOR EACH ROW EXECUTE FUNCTION meter_plan_changed();

