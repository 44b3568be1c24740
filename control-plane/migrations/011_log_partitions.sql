-- Log lines partitioned by day so that retention drops whole partitions instead of deleting rows.
-- The key is the job's creation time, the same for every line of a job: a job's log lives in one
-- partition (present whole or dropped whole), and (assignment_id, seq) stays unique through the
-- unique index that must include the key. `id` keeps its values: cursors given out stay valid.
ALTER TABLE log_lines RENAME TO log_lines_unpartitioned;
ALTER INDEX log_lines_pkey RENAME TO log_lines_unpartitioned_pkey;
ALTER INDEX log_lines_assignment_id_seq_key RENAME TO log_lines_unpartitioned_assignment_id_seq_key;
ALTER INDEX log_lines_job RENAME TO log_lines_unpartitioned_job;

CREATE SEQUENCE log_line_ids AS bigint;

CREATE TABLE log_lines (
  id bigint NOT NULL DEFAULT nextval('log_line_ids'),
  job_id text NOT NULL REFERENCES jobs (id),
  assignment_id text NOT NULL,
  seq integer NOT NULL CHECK (seq >= 0),
  stream text NOT NULL CHECK (stream IN ('stdout', 'stderr', 'system')),
  line text NOT NULL,
  at timestamptz NOT NULL,
  job_created_at timestamptz NOT NULL,
  PRIMARY KEY (id, job_created_at),
  UNIQUE (assignment_id, seq, job_created_at)
) PARTITION BY RANGE (job_created_at);
CREATE INDEX log_lines_job ON log_lines (job_id, id);

-- Rows outside every day partition (a line for a job whose day was already dropped) land here.
CREATE TABLE log_lines_default PARTITION OF log_lines DEFAULT;

-- Creates the partition of the UTC day `day` unless it exists; false when the default partition
-- already holds rows of that day (the new partition's bounds would contradict them).
CREATE FUNCTION create_log_lines_partition(day date) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  name text := 'log_lines_p' || to_char(day, 'YYYYMMDD');
  low timestamptz := day::timestamp AT TIME ZONE 'UTC';
  high timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
BEGIN
  IF to_regclass(name) IS NOT NULL THEN
    RETURN true;
  END IF;
  IF EXISTS (SELECT 1 FROM log_lines_default WHERE job_created_at >= low AND job_created_at < high) THEN
    RETURN false;
  END IF;
  EXECUTE format('CREATE TABLE %I PARTITION OF log_lines FOR VALUES FROM (%L) TO (%L)', name, low, high);
  RETURN true;
END;
$$;

SELECT create_log_lines_partition(d.day)
  FROM (SELECT DISTINCT (j.created_at AT TIME ZONE 'UTC')::date AS day
          FROM log_lines_unpartitioned l JOIN jobs j ON j.id = l.job_id
        UNION
        SELECT ((now() AT TIME ZONE 'UTC')::date + n) FROM generate_series(0, 7) AS n) AS d;

INSERT INTO log_lines (id, job_id, assignment_id, seq, stream, line, at, job_created_at)
SELECT l.id, l.job_id, l.assignment_id, l.seq, l.stream, l.line, l.at, j.created_at
  FROM log_lines_unpartitioned l JOIN jobs j ON j.id = l.job_id;
SELECT setval('log_line_ids', COALESCE((SELECT max(id) FROM log_lines_unpartitioned), 0) + 1, false);
DROP TABLE log_lines_unpartitioned;
ALTER SEQUENCE log_line_ids OWNED BY log_lines.id;

-- The trigger of the unpartitioned table went with it; on the partitioned table it sees the rows
-- of every partition.
CREATE TRIGGER log_lines_stored AFTER INSERT ON log_lines REFERENCING NEW TABLE AS new_lines
  FOR EACH STATEMENT EXECUTE FUNCTION notify_job_log_lines();
