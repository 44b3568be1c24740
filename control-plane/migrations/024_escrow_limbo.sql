-- Money the escrow holds after a job's release, and disputes that end without an admin.

-- A payout the escrow could not send at release (its PaymentDeferred event): credited to the
-- recipient on chain until that wallet calls withdraw(token); its Withdrawn event settles every
-- deferral of that (wallet, token) logged before it.
CREATE TABLE escrow_deferred_payments (
  chain_id integer NOT NULL,
  escrow_address text NOT NULL,
  tx_hash text NOT NULL,
  log_index integer NOT NULL,
  block_number bigint NOT NULL,
  job_id text NOT NULL REFERENCES jobs (id),
  -- Whose share it was in the release: the farm's payout, the platform's fee, the customer's rest.
  party text NOT NULL CHECK (party IN ('provider', 'treasury', 'customer')),
  recipient text NOT NULL,
  token text NOT NULL,
  amount numeric(78, 0) NOT NULL,
  deferred_at timestamptz NOT NULL DEFAULT now(),
  withdraw_tx_hash text,
  withdrawn_at timestamptz,
  PRIMARY KEY (chain_id, escrow_address, tx_hash, log_index)
);
CREATE INDEX escrow_deferred_payments_job ON escrow_deferred_payments (job_id);
CREATE INDEX escrow_deferred_payments_waiting ON escrow_deferred_payments (recipient, token) WHERE withdraw_tx_hash IS NULL;

-- The dispute's deadline (the JobDisputed event's disputeEndsAt) and how the dispute ended.
ALTER TABLE jobs
  ADD COLUMN dispute_ends_at timestamptz,
  ADD COLUMN dispute_outcome text CHECK (dispute_outcome IN ('resolved', 'timed_out'));
CREATE INDEX jobs_dispute_due ON jobs (dispute_ends_at) WHERE settlement_status = 'disputed';

-- The operator ends unresolved disputes past their deadline, through the same ledger.
ALTER TABLE operator_transactions DROP CONSTRAINT operator_transactions_action_check;
ALTER TABLE operator_transactions ADD CONSTRAINT operator_transactions_action_check
  CHECK (action IN ('authorizeRefund', 'completeJob', 'release', 'resolveDispute', 'claimDisputeTimeout'));
