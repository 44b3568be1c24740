-- The live log stream (GET /v1/jobs/:id/logs/stream) in each replica listens here: the payload is
-- the job id, raised once per statement that stores lines of a job and on each status change, and
-- delivered at commit, so a listener that reads after it sees the rows.
CREATE FUNCTION notify_job_log_lines() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('job_log', j.job_id) FROM (SELECT DISTINCT job_id FROM new_lines) AS j;
  RETURN NULL;
END;
$$;
CREATE TRIGGER log_lines_stored AFTER INSERT ON log_lines REFERENCING NEW TABLE AS new_lines
  FOR EACH STATEMENT EXECUTE FUNCTION notify_job_log_lines();

CREATE FUNCTION notify_job_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('job_log', NEW.id);
  RETURN NULL;
END;
$$;
CREATE TRIGGER jobs_status_changed AFTER UPDATE OF status ON jobs
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION notify_job_status();
