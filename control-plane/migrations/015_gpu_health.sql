-- Per-GPU health verdicts (shared/src/fleet/gpu-health.ts), recomputed by the control plane
-- from each heartbeat's reports and written only when a verdict or its reasons change: every
-- machine_gpus write reloads every replica's offer index. A failed GPU is not offered.
ALTER TABLE machine_gpus
  ADD COLUMN health text NOT NULL DEFAULT 'healthy' CHECK (health IN ('healthy', 'warning', 'failed')),
  ADD COLUMN health_reasons jsonb NOT NULL DEFAULT '[]'::jsonb,
  ADD COLUMN health_changed_at timestamptz;

-- The machine's last GPU health reports (ECC, remapped rows, XIDs…), written when a counter
-- changes; no trigger watches it.
ALTER TABLE machines ADD COLUMN gpu_health jsonb;
