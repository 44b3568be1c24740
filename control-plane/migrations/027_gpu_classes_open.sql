-- An open GPU catalog: besides the curated classes synced from shared/src/catalog, a class is
-- derived for any GPU of compute capability 7.5 or newer that no curated class matches, and
-- added here when a machine first reports one. Each class keeps its generation and how its
-- reference figures were obtained.
ALTER TABLE gpu_classes ADD COLUMN origin text NOT NULL DEFAULT 'curated' CHECK (origin IN ('curated', 'derived'));
ALTER TABLE gpu_classes ADD COLUMN architecture text;
ALTER TABLE gpu_classes ADD COLUMN figure_source text;
ALTER TABLE gpu_classes ADD COLUMN created_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE gpu_classes ADD CONSTRAINT gpu_classes_derived_id CHECK (origin = 'curated' OR class_id LIKE 'derived-%');
