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
