-- A machine proves its GPUs with a GPU challenge (shared/src/proof, docs/decisions.md "GPU
-- proof") instead of the CPU canary: `machines.verification` keeps its states, and what moves
-- it is now a challenge. Each challenge is kept for the admins' machine page.
CREATE TABLE gpu_challenges (
  id text PRIMARY KEY,
  machine_id text NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
  -- Why it ran: first enrollment (or first since the proof replaced the canary), a changed
  -- driver or GPU set, a retry after a failure, or the random idle re-check.
  cause text NOT NULL CHECK (cause IN ('enrollment', 'claims_changed', 'retry', 'idle')),
  -- preparing (sent, the machine sets up) -> running (go sent) -> opening (committed, rows asked)
  -- -> passed | failed (reason says why).
  state text NOT NULL CHECK (state IN ('preparing', 'running', 'opening', 'passed', 'failed')),
  simulated boolean NOT NULL,
  -- The class whose window the timing is held to (null: simulated, no timing).
  class_id text,
  m integer NOT NULL,
  n integer NOT NULL,
  k integer NOT NULL,
  rounds integer NOT NULL,
  checks integer NOT NULL,
  expected_seconds double precision,
  deadline_seconds double precision,
  -- [{index, uuid}]: the GPUs it runs on.
  gpus jsonb NOT NULL,
  pre_seed text NOT NULL,
  go_seed text,
  -- {uuid: concatenated roots (hex)} and {uuid: GPU seconds} as committed.
  roots jsonb,
  gpu_seconds jsonb,
  -- [{uuid, round, row}]: the rows the server opened after the commitment.
  opened jsonb,
  -- From sending go to receiving the commitment, on the server's clock.
  elapsed_ms integer,
  -- The server's own time checking the opened rows.
  check_ms integer,
  reason text,
  created_at timestamptz NOT NULL DEFAULT now(),
  go_at timestamptz,
  committed_at timestamptz,
  finished_at timestamptz
);
CREATE INDEX gpu_challenges_machine ON gpu_challenges (machine_id, created_at DESC);
CREATE INDEX gpu_challenges_open ON gpu_challenges (state, created_at) WHERE state IN ('preparing', 'running', 'opening');

ALTER TABLE machines
  -- The challenge now out, or the last one.
  ADD COLUMN challenge_id text,
  -- The last passed challenge on real GPUs (null for a simulated machine: it proves no class).
  ADD COLUMN proven_at timestamptz,
  -- When the next idle re-check is due (a random time, at most a day after the last pass).
  ADD COLUMN next_challenge_at timestamptz;

-- Machines verified by the canary have not proven their GPUs: they are proven at their next
-- hello (or from the sweep) before they are offered again. Seeded machines have no agent.
UPDATE machines
   SET verification = 'unverified',
       verification_reason = 'machines now prove their GPUs with a GPU challenge instead of the CPU canary; it runs at the agent''s next connection'
 WHERE token_hash IS NOT NULL AND verification <> 'unverified';

-- Offers say whether and when their machines proved their GPUs.
DROP TRIGGER machines_changed ON machines;
CREATE TRIGGER machines_changed
  AFTER UPDATE OF farm_id, region_key, status, price_per_gpu_hour_micro_usd, min_billing_seconds,
    benchmark_tier, cuda_version, driver_version, workloads, simulated, verification, drain_requested, cordoned, proven_at
  ON machines FOR EACH ROW
  WHEN ((OLD.farm_id, OLD.region_key, OLD.status, OLD.price_per_gpu_hour_micro_usd, OLD.min_billing_seconds, OLD.benchmark_tier,
         OLD.cuda_version, OLD.driver_version, OLD.workloads, OLD.simulated, OLD.verification, OLD.drain_requested, OLD.cordoned, OLD.proven_at)
        IS DISTINCT FROM
        (NEW.farm_id, NEW.region_key, NEW.status, NEW.price_per_gpu_hour_micro_usd, NEW.min_billing_seconds, NEW.benchmark_tier,
         NEW.cuda_version, NEW.driver_version, NEW.workloads, NEW.simulated, NEW.verification, NEW.drain_requested, NEW.cordoned, NEW.proven_at))
  EXECUTE FUNCTION notify_fleet_changed();
