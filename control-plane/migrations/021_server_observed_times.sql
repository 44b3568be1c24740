-- A run is billed on the control plane's own clock (issue 28): from this migration on,
-- `started_at` is when the server received the machine's start and `finished_at` when it received
-- the first report that the container ended (or when it ended the run itself). The machine's own
-- figures, on its own clock, are kept beside them: billing takes their difference only when it is
-- shorter. Rows written before keep the machine's times in `started_at`/`finished_at`.
ALTER TABLE assignments
  ADD COLUMN reported_started_at timestamptz,
  ADD COLUMN reported_finished_at timestamptz,
  -- When the assignment left the live states (offered, accepted, running), by the database's
  -- clock: the agent's log lines are taken until a short grace after it. NULL on a row that
  -- ended before this migration counts as ended long ago.
  ADD COLUMN ended_at timestamptz;
