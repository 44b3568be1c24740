-- `deterministic` as the accepted spec declares it (absent: false): the job says its outputs
-- depend only on its spec, its inputs and its job id. Derived from the spec so no writer of
-- jobs can disagree with it.
ALTER TABLE jobs ADD COLUMN deterministic boolean GENERATED ALWAYS AS (COALESCE((spec ->> 'deterministic')::boolean, false)) STORED;
