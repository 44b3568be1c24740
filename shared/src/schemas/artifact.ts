import { z } from 'zod';
import { httpUrlSchema, isoTimeSchema, nonNegativeIntSchema, sha256HexSchema } from './common.js';

/**
 * Artifact kinds. The spec shows `output`; we add `log` (the stored log of an assignment) and
 * `input` (a file the customer uploaded to mount under `/input/<mountName>`).
 */
export const ARTIFACT_KINDS = ['output', 'log', 'input'] as const;
export const artifactKindSchema = z.enum(ARTIFACT_KINDS);
export type ArtifactKind = z.infer<typeof artifactKindSchema>;

/** An artifact as listed in a job's `artifacts` array. `sha256` is the server's hash of the stored bytes. */
export const artifactSummarySchema = z.strictObject({
  id: z.string().min(1),
  kind: artifactKindSchema,
  filename: z.string().min(1),
  sizeBytes: nonNegativeIntSchema,
  sha256: sha256HexSchema,
});
export type ArtifactSummary = z.infer<typeof artifactSummarySchema>;

/**
 * `GET /v1/artifacts/:id?format=json` (or `Accept: application/json`): the summary plus where
 * it came from, when it expires and a signed download URL valid for 120 seconds. `jobId` is
 * null for an uploaded input not yet used by a job.
 */
export const artifactMetadataSchema = z.strictObject({
  object: z.literal('artifact'),
  id: z.string().min(1),
  kind: artifactKindSchema,
  filename: z.string().min(1),
  sizeBytes: nonNegativeIntSchema,
  sha256: sha256HexSchema,
  jobId: z.string().min(1).nullable(),
  createdAt: isoTimeSchema,
  expiresAt: isoTimeSchema,
  url: httpUrlSchema,
  urlExpiresAt: isoTimeSchema,
});
export type ArtifactMetadata = z.infer<typeof artifactMetadataSchema>;

/**
 * How much of an output tar the server lists: its first OUTPUT_FILES_MAX regular files, in tar
 * order. A tar holding more says so (`fileCount` above `files.length`); the whole tar is still
 * downloaded as one artifact.
 */
export const OUTPUT_FILES_MAX = 1000;

/** One regular file of an output tar: `index` names it in the download route; `sha256` is the server's hash of its bytes. */
export const outputFileSchema = z.strictObject({
  index: nonNegativeIntSchema,
  path: z.string().min(1),
  sizeBytes: nonNegativeIntSchema,
  sha256: sha256HexSchema,
});
export type OutputFile = z.infer<typeof outputFileSchema>;

/**
 * `GET /v1/artifacts/:id/files` (and the dashboard's `GET /dashboard/api/jobs/:id/output/files`):
 * the members of an output tar as the server read them when it settled the run, from the bytes
 * hashing to `tarSha256`. `state` is `unreadable` (with `reason`, no files) when those bytes are
 * not a tar the server could read. Only regular files are listed, with safe relative paths:
 * `skipped` counts the links (never followed or served), other special entries, and members
 * whose names are absolute, climb out with `..`, or hold control characters.
 */
export const outputFileListSchema = z.strictObject({
  object: z.literal('output_files'),
  artifactId: z.string().min(1),
  jobId: z.string().min(1).nullable(),
  tarSha256: sha256HexSchema,
  state: z.enum(['indexed', 'unreadable']),
  reason: z.string().nullable(),
  files: z.array(outputFileSchema),
  /** Regular files with safe names in the tar, listed or not (more than `files.length` past OUTPUT_FILES_MAX). */
  fileCount: nonNegativeIntSchema,
  skipped: z.strictObject({ links: nonNegativeIntSchema, other: nonNegativeIntSchema, unsafeNames: nonNegativeIntSchema }),
  indexedAt: isoTimeSchema,
});
export type OutputFileList = z.infer<typeof outputFileListSchema>;
