-- A customer's job templates: a named job spec to start from in the New job form or with
-- `gf run --template NAME`. The spec was checked by the job-create schema when it was saved;
-- built-in templates live in code (shared/src/templates), not here.
CREATE TABLE job_templates (
  account_id text NOT NULL REFERENCES accounts (id),
  name text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
  description text CHECK (char_length(description) <= 500),
  spec jsonb NOT NULL CHECK (jsonb_typeof(spec) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, name)
);
