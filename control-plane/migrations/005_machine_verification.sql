-- Machine verification: what a farm claims about itself (GPUs, driver, tier) is offered only
-- after the control plane ran its own canary on the machine and checked the GPU probe.
ALTER TABLE machines
  -- unverified (nothing passed yet, or the driver or GPUs changed since) -> verifying (a canary
  -- is out) -> verified | failed (reason says why; tried again later).
  ADD COLUMN verification text NOT NULL DEFAULT 'unverified' CHECK (verification IN ('unverified', 'verifying', 'verified', 'failed')),
  ADD COLUMN verification_reason text,
  -- The canary job now out or last run.
  ADD COLUMN verification_job_id text,
  ADD COLUMN verification_started_at timestamptz,
  ADD COLUMN verified_at timestamptz,
  -- What was verified: driver, simulated, and the GPUs (uuid, name, class, VRAM), compared with each hello.
  ADD COLUMN verified_fingerprint jsonb;

-- Seeded machines never connect and have no agent to verify: they are listed as seeded.
UPDATE machines SET verification = 'verified', verified_at = now() WHERE token_hash IS NULL;

-- A job the service runs itself (the verification canary): no escrow, never billed, on the
-- service's own account, so no customer lists it.
ALTER TABLE jobs ADD COLUMN kind text NOT NULL DEFAULT 'customer' CHECK (kind IN ('customer', 'verification'));

-- The offer index reloads when verification changes what is offered.
DROP TRIGGER machines_changed ON machines;
CREATE TRIGGER machines_changed
  AFTER INSERT OR DELETE OR UPDATE OF farm_id, region_key, status, price_per_gpu_hour_micro_usd, min_billing_seconds,
    benchmark_tier, cuda_version, driver_version, workloads, simulated, verification
  ON machines FOR EACH STATEMENT EXECUTE FUNCTION notify_fleet_changed();
