-- Uploads an agent makes straight to the object store (presigned multipart parts): the control
-- plane completes and re-reads them, and a sweep aborts those never completed.
CREATE TABLE artifact_uploads (
  id text PRIMARY KEY,
  assignment_id text NOT NULL,
  name text NOT NULL,
  object_key text NOT NULL,
  store_upload_id text NOT NULL,
  max_bytes bigint NOT NULL,
  part_bytes bigint NOT NULL,
  part_count int NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  -- Set by the completion that took the upload: a second completion of it is refused.
  claimed_at timestamptz
);
CREATE INDEX artifact_uploads_expires_at ON artifact_uploads (expires_at);
