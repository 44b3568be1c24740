-- Why the customer disputes a job's result, in their words (the dashboard asks before the
-- wallet sends `dispute`): the escrow's event carries no text, and the admin who resolves the
-- dispute reads it beside the job.
ALTER TABLE jobs ADD COLUMN dispute_reason text, ADD COLUMN dispute_evidence text, ADD COLUMN dispute_reason_at timestamptz;
