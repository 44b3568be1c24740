-- The admin side of the fleet: what happened to machines (fleet_events), who did what
-- (audit_log), drain and cordon on machines, quarantine on farms, and GPU history rolled up
-- per minute and per 15 minutes in partitions dropped whole.

-- Events: many per machine over its life, so bounded by a retention sweep (rows older than the
-- retention are deleted in batches); read newest first by (at, id).
CREATE TABLE fleet_events (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at timestamptz NOT NULL DEFAULT now(),
  type text NOT NULL,
  machine_id text,
  farm_id text,
  job_id text,
  message text NOT NULL,
  details jsonb NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX fleet_events_at ON fleet_events (at DESC, id DESC);
CREATE INDEX fleet_events_machine ON fleet_events (machine_id, at DESC, id DESC) WHERE machine_id IS NOT NULL;
CREATE INDEX fleet_events_farm ON fleet_events (farm_id, at DESC, id DESC) WHERE farm_id IS NOT NULL;
CREATE INDEX fleet_events_type ON fleet_events (type, at DESC, id DESC);

-- Who did what: admin actions are few, kept for good and never changed.
CREATE TABLE audit_log (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at timestamptz NOT NULL DEFAULT now(),
  actor_kind text NOT NULL CHECK (actor_kind IN ('admin_wallet', 'operator_wallet', 'admin_token', 'machine')),
  actor_id text NOT NULL,
  action text NOT NULL,
  target_type text NOT NULL CHECK (target_type IN ('machine', 'farm', 'account', 'api_key', 'job', 'enrollment_token', 'price', 'farm_operator')),
  target_id text NOT NULL,
  details jsonb NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX audit_log_at ON audit_log (at DESC, id DESC);
CREATE INDEX audit_log_target ON audit_log (target_type, target_id, at DESC);

CREATE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END;
$$;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log FOR EACH ROW EXECUTE FUNCTION refuse_change();
-- Events are deleted only by the retention sweep, never changed.
CREATE TRIGGER fleet_events_append_only BEFORE UPDATE ON fleet_events FOR EACH ROW EXECUTE FUNCTION refuse_change();

-- Drain (asked by an admin or the farm): no new assignment; the agent is told; what still runs
-- at the deadline is stopped and requeued. `draining` stays the agent's own report.
-- Cordon (admin only): no new assignment, the agent is not told, nothing is stopped.
ALTER TABLE machines
  ADD COLUMN drain_requested boolean NOT NULL DEFAULT false,
  ADD COLUMN drain_requested_at timestamptz,
  ADD COLUMN drain_deadline timestamptz,
  ADD COLUMN drain_reason text,
  ADD COLUMN cordoned boolean NOT NULL DEFAULT false,
  ADD COLUMN cordon_reason text;
CREATE INDEX machines_drain_deadline ON machines (drain_deadline) WHERE drain_requested AND drain_deadline IS NOT NULL;
CREATE INDEX machines_heartbeat ON machines (last_heartbeat_at);
CREATE INDEX machines_region ON machines (region_key);

-- A quarantined farm offers none of its machines; `suspended` stays for farms switched off before.
ALTER TABLE farms DROP CONSTRAINT farms_status_check;
ALTER TABLE farms ADD CONSTRAINT farms_status_check CHECK (status IN ('active', 'suspended', 'quarantined'));
ALTER TABLE farms ADD COLUMN quarantine_reason text, ADD COLUMN quarantined_at timestamptz;

-- The offer index and matcher reload when drain or cordon change what is offered.
DROP TRIGGER machines_changed ON machines;
CREATE TRIGGER machines_changed
  AFTER INSERT OR DELETE OR UPDATE OF farm_id, region_key, status, price_per_gpu_hour_micro_usd, min_billing_seconds,
    benchmark_tier, cuda_version, driver_version, workloads, simulated, verification, drain_requested, cordoned
  ON machines FOR EACH STATEMENT EXECUTE FUNCTION notify_fleet_changed();

CREATE INDEX assignments_machine_finished ON assignments (machine_id, finished_at) WHERE state IN ('failed', 'lost');

-- GPU history. Per minute (kept 48 h) and per 15 minutes (kept 30 d), each partitioned by UTC
-- day so retention drops whole partitions. Sums and counts (not averages) so that several
-- replicas can add to the same bucket and the 15-minute rows are sums of minute rows.
CREATE TABLE gpu_samples_minute (
  machine_id text NOT NULL,
  gpu_index integer NOT NULL,
  bucket timestamptz NOT NULL,
  samples integer NOT NULL,
  util_sum double precision NOT NULL DEFAULT 0, util_n integer NOT NULL DEFAULT 0,
  temp_sum double precision NOT NULL DEFAULT 0, temp_max double precision, temp_n integer NOT NULL DEFAULT 0,
  mem_sum double precision NOT NULL DEFAULT 0, mem_max double precision, mem_n integer NOT NULL DEFAULT 0,
  power_sum double precision NOT NULL DEFAULT 0, power_max double precision, power_n integer NOT NULL DEFAULT 0,
  PRIMARY KEY (machine_id, gpu_index, bucket)
) PARTITION BY RANGE (bucket);
CREATE TABLE gpu_samples_minute_default PARTITION OF gpu_samples_minute DEFAULT;

CREATE TABLE gpu_samples_15m (LIKE gpu_samples_minute INCLUDING DEFAULTS, PRIMARY KEY (machine_id, gpu_index, bucket)) PARTITION BY RANGE (bucket);
CREATE TABLE gpu_samples_15m_default PARTITION OF gpu_samples_15m DEFAULT;

-- Fleet-wide figures per minute for the overview's charts (one row a minute, written by whichever
-- replica gets there first).
CREATE TABLE fleet_series_minute (
  bucket timestamptz PRIMARY KEY,
  machines_online integer NOT NULL,
  gpus_busy integer NOT NULL,
  jobs_queued integer NOT NULL,
  jobs_running integer NOT NULL
);

-- Creates the day partition of `parent` (gpu_samples_minute or gpu_samples_15m) for the UTC day
-- `day` unless it exists; false when the default partition holds rows of that day.
CREATE FUNCTION create_history_partition(parent text, day date) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  name text := parent || '_p' || to_char(day, 'YYYYMMDD');
  low timestamptz := day::timestamp AT TIME ZONE 'UTC';
  high timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
  taken boolean;
BEGIN
  IF parent NOT IN ('gpu_samples_minute', 'gpu_samples_15m') THEN
    RAISE EXCEPTION 'not a history table: %', parent;
  END IF;
  IF to_regclass(name) IS NOT NULL THEN
    RETURN true;
  END IF;
  EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE bucket >= %L AND bucket < %L)', parent || '_default', low, high) INTO taken;
  IF taken THEN
    RETURN false;
  END IF;
  EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)', name, parent, low, high);
  RETURN true;
END;
$$;

SELECT create_history_partition(t.parent, (now() AT TIME ZONE 'UTC')::date + n)
  FROM (VALUES ('gpu_samples_minute'), ('gpu_samples_15m')) AS t(parent), generate_series(-1, 2) AS n;
