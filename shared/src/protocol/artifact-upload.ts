import { z } from 'zod';
import { httpUrlSchema, isoTimeSchema, nonNegativeIntSchema, sha256HexSchema } from '../schemas/common.js';

/**
 * How an agent uploads an artifact (`output-<n>` or `log`) of its assignment, over HTTP with its
 * machine token:
 *
 *   agent  POST <output URL>/uploads                       ->
 *          <- 200 {method: 'put'}                              PUT the bytes to <output URL>
 *          <- 201 {method: 'multipart', uploadId, partBytes, partUrls, …}
 *   agent  PUT partUrls[i] (part i+1, at most partBytes)   ->  the object store, not the control plane
 *   agent  POST <output URL>/uploads/<uploadId>            ->  {parts: [{partNumber, etag}], sha256, sizeBytes}
 *          <- 201 {artifactId, sha256, sizeBytes, …}            the control plane re-read the object
 *          <- 409 conflict                                     it hashed otherwise: nothing was kept
 *
 * `<output URL>` is `/agent/v1/assignments/:id/outputs/:name`. A control plane without the
 * plan route (404) or with the filesystem store (`put`) takes the bytes itself, as before.
 */
export const ARTIFACT_UPLOADS_SUFFIX = '/uploads';

export const uploadPlanSchema = z.discriminatedUnion('method', [
  z.strictObject({ method: z.literal('put') }),
  z.strictObject({
    method: z.literal('multipart'),
    uploadId: z.string().regex(/^upl_[0-9a-z]{26}$/),
    /** Every part but the last has exactly this many bytes; the last at most as many. */
    partBytes: z.number().int().positive(),
    /** The artifact's limit; `partUrls.length * partBytes` is at least this and less than it plus one part. */
    maxBytes: z.number().int().positive(),
    /** Presigned PUT of part `i + 1`. */
    partUrls: z.array(httpUrlSchema).min(1).max(10_000),
    /** When the part URLs stop working. */
    expiresAt: isoTimeSchema,
  }),
]);
export type UploadPlan = z.infer<typeof uploadPlanSchema>;

/** What the agent sends once its parts are stored: their ETags and the host's hash of the whole. */
export const uploadCompletionSchema = z.strictObject({
  parts: z
    .array(z.strictObject({ partNumber: z.number().int().min(1).max(10_000), etag: z.string().min(1).max(200) }))
    .min(1)
    .max(10_000),
  sha256: sha256HexSchema,
  sizeBytes: nonNegativeIntSchema,
});
export type UploadCompletion = z.infer<typeof uploadCompletionSchema>;
