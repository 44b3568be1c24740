-- Execution: enrolled machines and their link, assignments (a job on a machine), log lines,
-- artifacts, and the job's result and cost.

-- Where a farm is paid: the escrow's `provider` of each completion on its machines.
ALTER TABLE farms ADD COLUMN payout_address text CHECK (payout_address ~ '^0x[0-9a-f]{40}$');

-- One-time tokens an operator hands to `gf-agent enroll`; only their SHA-256 is stored.
CREATE TABLE enrollment_tokens (
  token_hash text PRIMARY KEY,
  farm_id text NOT NULL REFERENCES farms (id),
  region_key text NOT NULL REFERENCES regions (key),
  -- The price the enrolled machine is offered at; null: enrolled but not offered until priced.
  price_per_gpu_hour_micro_usd bigint CHECK (price_per_gpu_hour_micro_usd > 0),
  label text,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  used_at timestamptz,
  machine_id text REFERENCES machines (id)
);

ALTER TABLE machines
  -- SHA-256 of the machine token (`gfa_…`); null for seeded machines, which never connect.
  ADD COLUMN token_hash text UNIQUE,
  -- The ed25519 public key (SPKI PEM) that verifies the machine's execution records.
  ADD COLUMN public_key_pem text,
  ADD COLUMN agent_version text,
  ADD COLUMN inventory jsonb,
  ADD COLUMN benchmark jsonb,
  -- Live figures of the last heartbeat, per GPU.
  ADD COLUMN gpu_live jsonb,
  ADD COLUMN draining boolean NOT NULL DEFAULT false,
  ADD COLUMN connected_at timestamptz,
  -- Since when the machine is offline (no heartbeat for 50 s); its jobs are requeued after the grace.
  ADD COLUMN offline_since timestamptz,
  -- Outputs whose host hash differed from the server's re-hash: the machine's reputation.
  ADD COLUMN hash_mismatches integer NOT NULL DEFAULT 0;

-- A reserved GPU names the assignment holding it (busy = assignment_id IS NOT NULL for agents).
ALTER TABLE machine_gpus ADD COLUMN assignment_id text;
CREATE INDEX machine_gpus_free ON machine_gpus (machine_id) WHERE NOT busy;

ALTER TABLE jobs
  -- Assignments made so far (the first run is attempt 1; at most 3 in all).
  ADD COLUMN attempts integer NOT NULL DEFAULT 0,
  ADD COLUMN assignment_id text,
  ADD COLUMN verification_level text CHECK (verification_level IN ('RESULT_VERIFIED', 'EXECUTION_VERIFIED', 'HOST_REPORTED')),
  ADD COLUMN host_hash text,
  ADD COLUMN server_hash text,
  ADD COLUMN hashes_match boolean,
  ADD COLUMN output_artifact_id text,
  ADD COLUMN log_artifact_id text,
  ADD COLUMN billable_gpu_seconds integer,
  ADD COLUMN compute_micro_usd bigint,
  ADD COLUMN fee_micro_usd bigint,
  ADD COLUMN total_micro_usd bigint,
  ADD COLUMN failure_reason text,
  -- Bytes of log text stored for the job (the per-job cap counts them).
  ADD COLUMN log_bytes bigint NOT NULL DEFAULT 0,
  ADD COLUMN log_capped boolean NOT NULL DEFAULT false,
  -- Next seq of the service's own `system` lines (their assignmentId is the job id).
  ADD COLUMN service_log_seq integer NOT NULL DEFAULT 0;
CREATE INDEX jobs_queued ON jobs (seq) WHERE status = 'QUEUED';

-- One job on one machine. `state` follows the agent: offered -> accepted -> running ->
-- finished | failed; or rejected, lost (machine gone past the grace), canceled.
CREATE TABLE assignments (
  id text PRIMARY KEY,
  job_id text NOT NULL REFERENCES jobs (id),
  machine_id text NOT NULL REFERENCES machines (id),
  attempt integer NOT NULL CHECK (attempt >= 1),
  state text NOT NULL DEFAULT 'offered' CHECK (state IN ('offered', 'accepted', 'running', 'finished', 'failed', 'rejected', 'lost', 'canceled')),
  -- The agent's last reported state (pulling, starting, running, exited, uploading…).
  agent_state text,
  gpu_indices integer[] NOT NULL,
  class_id text NOT NULL REFERENCES gpu_classes (class_id),
  gpu_model text NOT NULL,
  price_per_gpu_hour_micro_usd bigint NOT NULL CHECK (price_per_gpu_hour_micro_usd > 0),
  -- The assignment as sent to the agent (shared/src/protocol/assignment.ts).
  spec jsonb NOT NULL,
  offered_at timestamptz NOT NULL DEFAULT now(),
  accepted_at timestamptz,
  started_at timestamptz,
  finished_at timestamptz,
  exit_code integer,
  oom_killed boolean,
  timed_out boolean,
  image_digest text,
  failure_code text,
  failure_message text,
  -- The `finished` report: outputs (path, name, sha256, sizeBytes), log, signed record.
  outputs jsonb,
  log_report jsonb,
  record_json text,
  record_signature text,
  last_log_seq integer,
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX assignments_live_job ON assignments (job_id) WHERE state IN ('offered', 'accepted', 'running');
CREATE INDEX assignments_machine_live ON assignments (machine_id) WHERE state IN ('offered', 'accepted', 'running');
CREATE INDEX assignments_job ON assignments (job_id);

-- Machines that refused or dropped a job are not offered it again.
CREATE TABLE job_exclusions (
  job_id text NOT NULL REFERENCES jobs (id),
  machine_id text NOT NULL REFERENCES machines (id),
  reason text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (job_id, machine_id)
);

-- Each (assignment, seq) once. `id` is the public log cursor: it only grows.
-- The service's own lines use the job id as their assignment id.
CREATE TABLE log_lines (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  job_id text NOT NULL REFERENCES jobs (id),
  assignment_id text NOT NULL,
  seq integer NOT NULL CHECK (seq >= 0),
  stream text NOT NULL CHECK (stream IN ('stdout', 'stderr', 'system')),
  line text NOT NULL,
  at timestamptz NOT NULL,
  UNIQUE (assignment_id, seq)
);
CREATE INDEX log_lines_job ON log_lines (job_id, id);

-- Stored bytes, content-addressed by `sha256` in the artifact store; a row per use.
CREATE TABLE artifacts (
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts (id),
  job_id text REFERENCES jobs (id),
  assignment_id text,
  kind text NOT NULL CHECK (kind IN ('output', 'log', 'input')),
  -- The upload's name (`output-0`, `log`) for agent uploads; null for inputs.
  name text,
  filename text NOT NULL,
  size_bytes bigint NOT NULL CHECK (size_bytes >= 0),
  sha256 text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  -- What the uploader declared (the host's hash), null when it declared none.
  declared_sha256 text,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX artifacts_job ON artifacts (job_id);
CREATE INDEX artifacts_sha256 ON artifacts (sha256);
CREATE UNIQUE INDEX artifacts_assignment_name ON artifacts (assignment_id, name) WHERE assignment_id IS NOT NULL;
CREATE INDEX artifacts_expires ON artifacts (expires_at);
