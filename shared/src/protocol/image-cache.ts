import { z } from 'zod';
import { isoTimeSchema, nonNegativeIntSchema } from '../schemas/common.js';

/**
 * The images a machine holds (protocol 8, `heartbeat.images`): what image-aware matching reads
 * to prefer, among equal offers, the machine that already holds most of a job's image by bytes.
 *
 * Layers are listed once in `layers` and referred to by index from each image, since images of
 * one machine share their base layers; a layer is named by its uncompressed digest (Docker's
 * `RootFS.Layers`, the same on every machine). The report is bounded so that one heartbeat stays
 * small: the images used most recently come first, and those that do not fit are counted in
 * `omitted` rather than listed.
 */

const imageDigestSchema = z.string().regex(/^sha256:[a-f0-9]{64}$/, { error: 'must be sha256: followed by 64 hex digits' });
/** `repo@sha256:…` or `repo:tag`, as Docker lists them. */
const imageNameSchema = z.string().min(1).max(512);

/** Most images one report lists. */
export const MAX_REPORTED_IMAGES = 64;
/** Most distinct layers one report lists (over all its images). */
export const MAX_REPORTED_LAYERS = 1024;

export const cachedLayerSchema = z.strictObject({
  /** The layer's uncompressed digest (`RootFS.Layers`). */
  digest: imageDigestSchema,
  /** Bytes on disk, uncompressed; 0 when Docker does not say. */
  sizeBytes: nonNegativeIntSchema,
});
export type CachedLayer = z.infer<typeof cachedLayerSchema>;

export const cachedImageSchema = z.strictObject({
  /** The local image id (the config's digest). */
  id: imageDigestSchema,
  /** `repo@sha256:<manifest digest>`: what a pinned job names. */
  repoDigests: z.array(imageNameSchema).max(16),
  /** `repo:tag`: what an unpinned job names (a tag may have moved since; a preference only). */
  repoTags: z.array(imageNameSchema).max(16),
  /** Indexes into the report's `layers`, base first. */
  layers: z.array(nonNegativeIntSchema).max(256),
  /** The last time a job was started from it (or it was pulled); the cache evicts the oldest first. */
  lastUsedAt: isoTimeSchema,
});
export type CachedImage = z.infer<typeof cachedImageSchema>;

export const imageCacheReportSchema = z
  .strictObject({
    /** The cache's disk budget (`image_cache_bytes`). */
    budgetBytes: nonNegativeIntSchema,
    /** Bytes the cached images take, every layer counted once. */
    usedBytes: nonNegativeIntSchema,
    images: z.array(cachedImageSchema).max(MAX_REPORTED_IMAGES),
    layers: z.array(cachedLayerSchema).max(MAX_REPORTED_LAYERS),
    /** Images held but not listed (the report was full). */
    omitted: nonNegativeIntSchema,
  })
  .superRefine((report, ctx) => {
    report.images.forEach((image, i) => {
      image.layers.forEach((layer, j) => {
        if (layer >= report.layers.length) ctx.addIssue({ code: 'custom', path: ['images', i, 'layers', j], message: `must index a listed layer (0 to ${report.layers.length - 1})` });
      });
    });
  });
export type ImageCacheReport = z.infer<typeof imageCacheReportSchema>;
