import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { isoTimeSchema, nonNegativeIntSchema } from '@gpufarm/shared';
import { writeFileAtomic } from '../config/state.js';

const digestSchema = z.string().regex(/^sha256:[a-f0-9]{64}$/);

/**
 * One image of the agent's cache: an image this agent pulled, for a job or from the pre-pull
 * list. Only these are reported and evicted; the operator's other images on the same Docker
 * Engine, and another agent's, are never touched.
 */
export const cacheEntrySchema = z.strictObject({
  /** The local image id (config digest). */
  id: digestSchema,
  /** The names this agent pulled it by (`repo@sha256:…` or `repo:tag`): eviction removes these, never another name of the image. */
  references: z.array(z.string().min(1)).min(1).max(16),
  source: z.enum(['job', 'prepull']),
  /** As Docker last listed them. */
  repoDigests: z.array(z.string()).max(16),
  repoTags: z.array(z.string()).max(16),
  /** `RootFS.Layers`, base first, with each layer's bytes from the image's history (0 when it could not be told). */
  layers: z.array(z.strictObject({ digest: digestSchema, sizeBytes: nonNegativeIntSchema })),
  /** Bytes of the image that history could not give a layer (counted whole in the cache's use). */
  unattributedBytes: nonNegativeIntSchema,
  pulledAt: isoTimeSchema,
  lastUsedAt: isoTimeSchema,
});
export type CacheEntry = z.infer<typeof cacheEntrySchema>;

export const cacheIndexFileSchema = z.strictObject({
  version: z.literal(1),
  images: z.array(cacheEntrySchema),
});

/** `image-cache.json` in the state dir: the cache index; a missing file is an empty cache. @throws Error naming the file when it is not a valid index */
export function readCacheIndex(path: string): CacheEntry[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new Error(`${path} is not JSON`);
  }
  const parsed = cacheIndexFileSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`${path} is not a valid image cache index (${issue ? `${issue.path.join('.')}: ${issue.message}` : 'invalid'})`);
  }
  return parsed.data.images;
}

export function writeCacheIndex(path: string, images: readonly CacheEntry[]): void {
  writeFileAtomic(path, `${JSON.stringify({ version: 1, images }, null, 2)}\n`, 0o644);
}
