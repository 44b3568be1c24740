-- Escrow: each job's funding terms on chain, the funding events credited to jobs, settlement and refunds.

ALTER TABLE jobs
  -- Fixed when funding opens for the job: the escrow it is funded on and keccak256 of its terms.
  ADD COLUMN escrow_address text,
  ADD COLUMN job_hash text,
  -- Set when the funding behind a job vanished in a reorg: the job must not run.
  ADD COLUMN funding_hold text,
  ADD COLUMN fund_tx_hash text,
  -- completion: completed -> (disputed) -> released; its amounts in token base units.
  ADD COLUMN settlement_status text CHECK (settlement_status IN ('completed', 'disputed', 'released')),
  ADD COLUMN settlement_amount numeric(78, 0),
  ADD COLUMN compute_seconds integer,
  ADD COLUMN result_hash text,
  ADD COLUMN challenge_ends_at timestamptz,
  ADD COLUMN completion_tx_hash text,
  ADD COLUMN release_tx_hash text,
  -- refund: pending (to authorize on chain) -> authorized -> claimed (by the customer).
  ADD COLUMN refund_status text CHECK (refund_status IN ('pending', 'authorized', 'claimed')),
  ADD COLUMN refund_authorize_tx_hash text,
  ADD COLUMN refund_tx_hash text;

CREATE INDEX jobs_escrow_key ON jobs (escrow_job_key);
CREATE INDEX jobs_refund_pending ON jobs (refund_status) WHERE refund_status = 'pending';
CREATE INDEX jobs_release_due ON jobs (challenge_ends_at) WHERE settlement_status = 'completed' AND release_tx_hash IS NULL;

-- One row per JobFunded log credited to a job: a log funds one job once, ever.
CREATE TABLE escrow_credits (
  chain_id integer NOT NULL,
  tx_hash text NOT NULL,
  log_index integer NOT NULL,
  job_id text NOT NULL REFERENCES jobs (id),
  job_key text NOT NULL,
  customer text NOT NULL,
  token text NOT NULL,
  amount numeric(78, 0) NOT NULL,
  block_number bigint NOT NULL,
  block_hash text NOT NULL,
  -- credited: it funds the job; reorged: its block left the chain.
  status text NOT NULL DEFAULT 'credited' CHECK (status IN ('credited', 'reorged')),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (chain_id, tx_hash, log_index)
);
CREATE UNIQUE INDEX escrow_credits_job ON escrow_credits (job_id) WHERE status = 'credited';
CREATE INDEX escrow_credits_checked ON escrow_credits (block_number) WHERE status = 'credited';
