-- The members of an output tar, read once when the run is settled (artifacts/output-index.ts):
-- the dashboard lists them and serves one file out of the stored tar, checked against its
-- hash here. Keyed by the artifact row; `tar_sha256` names the bytes read, so an index is
-- served only while the row still holds those bytes.
CREATE TABLE output_indexes (
  artifact_id text PRIMARY KEY REFERENCES artifacts (id) ON DELETE CASCADE,
  tar_sha256 text NOT NULL CHECK (tar_sha256 ~ '^[0-9a-f]{64}$'),
  state text NOT NULL CHECK (state IN ('indexed', 'unreadable')),
  reason text,
  -- Regular files with safe names in the tar, listed or not (the list keeps the first OUTPUT_FILES_MAX).
  file_count integer NOT NULL CHECK (file_count >= 0),
  skipped_links integer NOT NULL DEFAULT 0,
  skipped_other integer NOT NULL DEFAULT 0,
  skipped_unsafe_names integer NOT NULL DEFAULT 0,
  indexed_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE output_index_files (
  artifact_id text NOT NULL REFERENCES output_indexes (artifact_id) ON DELETE CASCADE,
  -- The file's place in the list (0-based, tar order): what the download route names.
  ordinal integer NOT NULL CHECK (ordinal >= 0),
  path text NOT NULL,
  size_bytes bigint NOT NULL CHECK (size_bytes >= 0),
  sha256 text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  -- Where the file's bytes start in the tar: a download reads just that range of the blob.
  data_offset bigint NOT NULL CHECK (data_offset >= 0),
  PRIMARY KEY (artifact_id, ordinal)
);
