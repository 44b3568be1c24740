-- The mean utilization of the machine's GPUs at its last heartbeat, written with the beat, so the
-- admin machines table sorts by a column rather than by reading every machine's `gpu_live`.
ALTER TABLE machines ADD COLUMN gpu_utilization_percent real;
UPDATE machines m SET gpu_utilization_percent = (
  SELECT avg((x ->> 'utilizationPercent')::float8) FROM jsonb_array_elements(m.gpu_live) x
) WHERE jsonb_typeof(m.gpu_live) = 'array';
