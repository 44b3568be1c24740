-- The dashboard's job timeline (GET /dashboard/api/jobs/:id/timeline) reads each state's time from
-- the records that made it. Two had none: the job's last status change (for a terminal job, when it
-- ended: a cancel or an expiry leaves no other trace with a time) and the customer's dispute, whose
-- transaction the escrow event scan saw but did not keep (a release overwrites `disputed`).
ALTER TABLE jobs
  ADD COLUMN status_changed_at timestamptz,
  ADD COLUMN dispute_tx_hash text,
  ADD COLUMN disputed_at timestamptz;
-- Jobs from before: their last write is the best time known.
UPDATE jobs SET status_changed_at = updated_at;
ALTER TABLE jobs ALTER COLUMN status_changed_at SET DEFAULT now(), ALTER COLUMN status_changed_at SET NOT NULL;

-- Stamped by the database so that every writer of `status` keeps it, with no column to forget.
CREATE FUNCTION stamp_job_status_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.status_changed_at := now();
  RETURN NEW;
END;
$$;
CREATE TRIGGER jobs_status_stamped BEFORE UPDATE OF status ON jobs
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION stamp_job_status_change();
