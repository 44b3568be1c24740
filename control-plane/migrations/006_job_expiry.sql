-- Unfunded jobs expire (CREATED -> EXPIRED) a while after their creation: the sweep reads the
-- oldest CREATED jobs first.
CREATE INDEX jobs_unfunded ON jobs (created_at) WHERE status = 'CREATED';
