-- The operator area: enrollment tokens an operator lists and revokes, the fee each completion
-- recorded (the farm is paid payout - fee on release), machines an operator unenrolled.

-- Tokens are named by an id in lists and revocations: their hash is the secret's stand-in and stays private.
ALTER TABLE enrollment_tokens
  ADD COLUMN id text,
  ADD COLUMN revoked_at timestamptz;
UPDATE enrollment_tokens SET id = 'enrt_' || substr(token_hash, 1, 26) WHERE id IS NULL;
ALTER TABLE enrollment_tokens ALTER COLUMN id SET NOT NULL;
CREATE UNIQUE INDEX enrollment_tokens_id ON enrollment_tokens (id);
CREATE INDEX enrollment_tokens_farm ON enrollment_tokens (farm_id, created_at DESC);

-- The escrow's fee of the completion, in token base units (`settlement_amount` is the payout with it inside).
ALTER TABLE jobs ADD COLUMN settlement_fee numeric(78, 0);

-- Set when the machine's agent unenrolled it: its token no longer opens a link, it is offered nowhere.
ALTER TABLE machines ADD COLUMN unenrolled_at timestamptz;
-- The ledger's completion and release times are the job's billing entries.
CREATE INDEX billing_entries_job ON billing_entries (job_id) WHERE job_id IS NOT NULL;
