-- Foundation: settings, catalog, accounts and API keys, the fleet, uptime, billing, rate limits.

CREATE TABLE service_settings (
  key text PRIMARY KEY,
  value text NOT NULL
);

-- Catalogs: synced from shared/src/catalog at start; rows are never deleted while referenced.
CREATE TABLE regions (
  key text PRIMARY KEY,
  label text NOT NULL,
  region_group text NOT NULL
);

CREATE TABLE gpu_classes (
  class_id text PRIMARY KEY,
  label text NOT NULL,
  model text NOT NULL,
  vendor text NOT NULL,
  family text NOT NULL,
  vram_bytes bigint NOT NULL CHECK (vram_bytes > 0),
  expected_matmul_gflops bigint NOT NULL,
  expected_memory_bandwidth_mbps bigint NOT NULL
);

CREATE TABLE accounts (
  id text PRIMARY KEY,
  wallet_address text NOT NULL UNIQUE CHECK (wallet_address ~ '^0x[0-9a-f]{40}$'),
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Only the SHA-256 of a key is stored; `last_four` lets a person tell keys apart.
CREATE TABLE api_keys (
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts (id),
  key_hash text NOT NULL UNIQUE,
  environment text NOT NULL CHECK (environment IN ('live', 'test')),
  last_four text NOT NULL,
  scopes text[] NOT NULL,
  label text,
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
);
CREATE INDEX api_keys_account ON api_keys (account_id);

CREATE TABLE farms (
  id text PRIMARY KEY,
  slug text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9][a-z0-9-]{1,62}$'),
  name text NOT NULL,
  provider text NOT NULL,
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
  created_at timestamptz NOT NULL DEFAULT now()
);

-- A machine is offered when it is online, its farm active and it has a price.
CREATE TABLE machines (
  id text PRIMARY KEY,
  farm_id text NOT NULL REFERENCES farms (id),
  region_key text NOT NULL REFERENCES regions (key),
  status text NOT NULL DEFAULT 'offline' CHECK (status IN ('online', 'offline', 'unhealthy', 'draining', 'disabled')),
  health_reason text,
  price_per_gpu_hour_micro_usd bigint CHECK (price_per_gpu_hour_micro_usd > 0),
  min_billing_seconds integer NOT NULL DEFAULT 60 CHECK (min_billing_seconds >= 60),
  benchmark_tier text CHECK (benchmark_tier IN ('S', 'A', 'B', 'C')),
  cuda_version text,
  driver_version text,
  cpu_cores integer,
  ram_bytes bigint,
  disk_free_bytes bigint,
  workloads text[],
  simulated boolean NOT NULL DEFAULT false,
  last_heartbeat_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX machines_farm ON machines (farm_id);
CREATE INDEX machines_offered ON machines (region_key, price_per_gpu_hour_micro_usd) WHERE status = 'online' AND price_per_gpu_hour_micro_usd IS NOT NULL;

CREATE TABLE machine_gpus (
  machine_id text NOT NULL REFERENCES machines (id) ON DELETE CASCADE,
  gpu_index integer NOT NULL CHECK (gpu_index >= 0),
  uuid text,
  class_id text NOT NULL REFERENCES gpu_classes (class_id),
  vram_bytes bigint NOT NULL CHECK (vram_bytes > 0),
  busy boolean NOT NULL DEFAULT false,
  PRIMARY KEY (machine_id, gpu_index)
);
CREATE INDEX machine_gpus_class ON machine_gpus (class_id);

-- Seconds a machine was heard from, per UTC day: 30 rows per machine give the 30-day uptime.
CREATE TABLE machine_uptime_days (
  machine_id text NOT NULL REFERENCES machines (id) ON DELETE CASCADE,
  day date NOT NULL,
  seconds_up integer NOT NULL CHECK (seconds_up BETWEEN 0 AND 86400),
  PRIMARY KEY (machine_id, day)
);
CREATE INDEX machine_uptime_days_day ON machine_uptime_days (day);

-- `seq` orders lists: ids made in one millisecond are not ordered among themselves.
CREATE TABLE billing_entries (
  id text PRIMARY KEY,
  seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  account_id text NOT NULL REFERENCES accounts (id),
  type text NOT NULL,
  job_id text,
  amount_micro_usd bigint NOT NULL,
  token text,
  amount numeric(78, 0),
  tx_hash text,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX billing_entries_account ON billing_entries (account_id, seq DESC);

-- Fixed-window counters for the shared rate-limit store (several replicas); lost on a crash by design.
CREATE UNLOGGED TABLE rate_limit_counters (
  bucket_key text NOT NULL,
  window_start bigint NOT NULL,
  hits integer NOT NULL,
  PRIMARY KEY (bucket_key, window_start)
);

-- The offer index in each replica listens here and reloads when the fleet changes.
CREATE FUNCTION notify_fleet_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('fleet_changed', TG_TABLE_NAME);
  RETURN NULL;
END;
$$;
CREATE TRIGGER farms_changed AFTER INSERT OR UPDATE OR DELETE ON farms FOR EACH STATEMENT EXECUTE FUNCTION notify_fleet_changed();
-- Not on heartbeat columns (last_heartbeat_at, disk_free_bytes…): those would reload every index constantly.
CREATE TRIGGER machines_changed
  AFTER INSERT OR DELETE OR UPDATE OF farm_id, region_key, status, price_per_gpu_hour_micro_usd, min_billing_seconds,
    benchmark_tier, cuda_version, driver_version, workloads, simulated
  ON machines FOR EACH STATEMENT EXECUTE FUNCTION notify_fleet_changed();
CREATE TRIGGER machine_gpus_changed AFTER INSERT OR UPDATE OR DELETE ON machine_gpus FOR EACH STATEMENT EXECUTE FUNCTION notify_fleet_changed();
