-- Jobs: the creation spec as accepted (defaults applied), its fixed price terms and escrow terms.

-- Ids are random (they reveal nothing); `seq` gives the order lists walk.
CREATE TABLE jobs (
  id text PRIMARY KEY,
  seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  account_id text NOT NULL REFERENCES accounts (id),
  api_key_id text NOT NULL REFERENCES api_keys (id),
  status text NOT NULL CHECK (status IN ('CREATED', 'FUNDED', 'QUEUED', 'MATCHING', 'RUNNING', 'COMPLETED', 'FAILED', 'TIMED_OUT', 'CANCELED', 'EXPIRED')),
  spec jsonb NOT NULL,
  spec_hash text NOT NULL,
  title text,
  gpu_count integer NOT NULL CHECK (gpu_count BETWEEN 1 AND 16),
  workload_type text NOT NULL,
  max_runtime_seconds integer NOT NULL,
  max_price_per_gpu_hour_micro_usd bigint NOT NULL CHECK (max_price_per_gpu_hour_micro_usd > 0),
  min_billing_seconds integer NOT NULL,
  platform_fee_bps integer NOT NULL,
  estimate_low_micro_usd bigint NOT NULL,
  estimate_high_micro_usd bigint NOT NULL,
  max_cost_micro_usd bigint NOT NULL,
  matched_classes text[] NOT NULL,
  payment_kind text NOT NULL CHECK (payment_kind IN ('eth', 'stable')),
  payment_token text NOT NULL,
  payment_symbol text NOT NULL,
  payment_decimals integer NOT NULL,
  max_payment numeric(78, 0) NOT NULL,
  wei_per_usd numeric(78, 0),
  escrow_job_key text NOT NULL,
  cancel_reason text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX jobs_account ON jobs (account_id, seq DESC);
CREATE INDEX jobs_status ON jobs (status) WHERE status IN ('CREATED', 'QUEUED', 'MATCHING', 'RUNNING');

-- A retried POST /v1/jobs with the same Idempotency-Key and body gets the first response again.
CREATE TABLE idempotency_keys (
  account_id text NOT NULL REFERENCES accounts (id),
  key text NOT NULL,
  request_hash text NOT NULL,
  job_id text NOT NULL REFERENCES jobs (id),
  -- The first response as sent (text, not jsonb: a replay is byte-for-byte the same).
  response text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
