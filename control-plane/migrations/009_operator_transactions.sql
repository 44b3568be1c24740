-- The operator's escrow transactions, one row per job action (the escrow job key and the
-- function): each is signed and its nonce, hash and bytes recorded before it is broadcast, so an
-- action is sent once across replicas and crashes; the row is resolved from the chain (a receipt,
-- or its nonce taken by another transaction) before the action is ever signed again.
CREATE TABLE operator_transactions (
  chain_id integer NOT NULL,
  escrow_address text NOT NULL,
  job_key text NOT NULL,
  action text NOT NULL CHECK (action IN ('authorizeRefund', 'completeJob', 'release', 'resolveDispute')),
  sender text NOT NULL,
  nonce bigint NOT NULL,
  tx_hash text NOT NULL,
  raw_tx text NOT NULL,
  -- sent: broadcast (or about to be), outcome unknown; mined / reverted: its receipt;
  -- dropped: its nonce went to another transaction, so it can never be mined.
  state text NOT NULL CHECK (state IN ('sent', 'mined', 'reverted', 'dropped')),
  attempts integer NOT NULL DEFAULT 1,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (chain_id, escrow_address, job_key, action)
);
