-- The phases of a run's start and end, one row per assignment (issue 34, item 4), every time on
-- the control plane's clock: when it received each report, never the machine's own times (see
-- docs/decisions.md, "Start phases on the server's clock"). Written by `phases/store.ts` only.
-- The row is made when the matcher offers the assignment, in the same transaction, so
-- `queued_at` is when the job last entered QUEUED (its status time before the offer moved it).
CREATE TABLE job_phases (
  assignment_id text PRIMARY KEY REFERENCES assignments (id),
  job_id text NOT NULL REFERENCES jobs (id),
  machine_id text NOT NULL REFERENCES machines (id),
  queued_at timestamptz NOT NULL,
  -- The offer (the assignment's `offered_at`).
  matched_at timestamptz NOT NULL,
  -- The agent's `pulling`: it began pulling the image (none when the machine held it).
  pull_started_at timestamptz,
  -- The agent's `starting`: the image is on the machine; the container is being made.
  image_ready_at timestamptz,
  -- The agent's `running` (the same receipt as the assignment's `started_at`).
  running_at timestamptz,
  -- The first line the job itself wrote (stdout or stderr, not the machine's notes), as received.
  first_log_at timestamptz,
  -- The first report that the container ended (`exited`, `uploading` or `finished`).
  exited_at timestamptz,
  -- The agent's `finished`: outputs and log uploaded.
  finished_at timestamptz
);
CREATE INDEX job_phases_job ON job_phases (job_id, matched_at);
CREATE INDEX job_phases_machine ON job_phases (machine_id, matched_at);
