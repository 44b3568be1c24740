-- The images each machine's agent last reported holding (protocol 8, `heartbeat.images`), one
-- row per machine, replaced whenever a report arrives (the agent sends one when its cache
-- changes). Image-aware matching reads it to prefer, among equal offers, the machine that holds
-- most of a job's image; job estimates and the operators' most requested images count holders.
-- `image_names` are every listed image's names reduced as `imageCacheKey` does
-- (`repo@sha256:…`, `repo:tag`) and `layer_digests` the report's layers, both indexed so a
-- lookup by image or by layer reads only the machines that hold it; `report` is the report as
-- received (layers by index).
CREATE TABLE machine_images (
  machine_id text PRIMARY KEY REFERENCES machines (id) ON DELETE CASCADE,
  budget_bytes bigint NOT NULL CHECK (budget_bytes >= 0),
  used_bytes bigint NOT NULL CHECK (used_bytes >= 0),
  omitted int NOT NULL CHECK (omitted >= 0),
  image_names text[] NOT NULL,
  layer_digests text[] NOT NULL,
  report jsonb NOT NULL CHECK (jsonb_typeof(report) = 'object'),
  reported_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX machine_images_names ON machine_images USING gin (image_names);
CREATE INDEX machine_images_layers ON machine_images USING gin (layer_digests);

-- The operators' most requested images read the jobs of the last days by creation time.
CREATE INDEX jobs_created ON jobs (created_at);
