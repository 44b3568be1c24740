import { z } from 'zod';
import { assignmentOutputRuleSchema } from '@gpufarm/shared';
import { CHUNK_BYTES, READ_ALIGN } from './pack.js';

/** Chunks of shared memory per source: the window, and the chunks inside the tar and hash streams. */
export const LENDING_SLOTS = 12;

/** The shared memory a source's file chunks are lent in (see `LENDING_SLOTS`). */
export function lendingMemory(): SharedArrayBuffer {
  return new SharedArrayBuffer(READ_ALIGN + LENDING_SLOTS * CHUNK_BYTES);
}

/** What to pack: what an output rule covers (a tar), or a file as it is. */
const artifactSpec = z.discriminatedUnion('kind', [
  /** `packAs`: read the files as this user (`packingUser`); absent or null: as the agent. */
  z.object({ kind: z.literal('rule'), outputDir: z.string(), rule: assignmentOutputRuleSchema, packAs: z.object({ uid: z.int(), gid: z.int() }).nullable().optional() }),
  z.object({ kind: z.literal('file'), path: z.string(), limitBytes: z.number().int().positive() }),
]);
export type PackedArtifact = z.infer<typeof artifactSpec>;

/** `uploadArtifact`'s options but its source (see upload.ts). */
export const uploadRequestOptions = z.object({
  url: z.string(),
  planUrl: z.string().optional(),
  headers: z.record(z.string(), z.string()).optional(),
  contentType: z.string().optional(),
  attempts: z.number().int().positive().optional(),
  backoffMs: z.number().nonnegative().optional(),
  idleTimeoutMs: z.number().positive().optional(),
});

/** What `OffThreadPacker` asks its worker (off-thread.ts, pack-worker.ts). */
export const packerRequest = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('open'),
    id: z.number().int(),
    /** Where the worker reads the source's file chunks into: `LENDING_SLOTS` chunks from `READ_ALIGN` on. */
    memory: z.instanceof(SharedArrayBuffer),
    artifact: artifactSpec,
  }),
  /** Pack and upload an artifact on the worker, start to end (`uploadArtifact` there). */
  z.object({ type: z.literal('upload'), id: z.number().int(), artifact: artifactSpec, options: uploadRequestOptions }),
  /**
   * The consumer is done with a chunk: the worker may send another. `offset` is where a lent
   * chunk lies in the source's memory, which the worker reads into again; null for a copied one.
   */
  z.object({ type: z.literal('release'), id: z.number().int(), offset: z.number().int().nonnegative().nullable() }),
  z.object({ type: z.literal('cancel'), id: z.number().int() }),
]);
export type PackerRequest = z.infer<typeof packerRequest>;

/** What the worker answers: the artifact's bytes in order, then its digest or the error. */
export const packerReply = z.discriminatedUnion('type', [
  /** A file chunk, lent: `length` bytes at `offset` of the source's memory. */
  z.object({ type: z.literal('lent'), id: z.number().int(), offset: z.number().int().nonnegative(), length: z.number().int().positive() }),
  /** Any other chunk (tar headers and padding), copied. */
  z.object({ type: z.literal('chunk'), id: z.number().int(), bytes: z.instanceof(ArrayBuffer) }),
  z.object({ type: z.literal('end'), id: z.number().int(), digest: z.object({ sha256: z.string(), sizeBytes: z.number().int() }) }),
  z.object({
    type: z.literal('error'),
    id: z.number().int(),
    message: z.string(),
    /** Set when the error was `ArtifactTooLargeError`, which the main thread throws again. */
    tooLarge: z.object({ limitBytes: z.number(), path: z.string() }).nullable(),
    /** Set when the error was `UploadError` (an upload's), thrown again likewise. */
    upload: z.object({ retryable: z.boolean(), status: z.number().int().nullable() }).nullable().optional(),
    /** True when the error was `OutputFilesError` (the job's own files), thrown again likewise. */
    unpackable: z.boolean().optional(),
  }),
  /** An upload's result. */
  z.object({
    type: z.literal('uploaded'),
    id: z.number().int(),
    result: z.object({ sha256: z.string(), sizeBytes: z.number().int(), attempts: z.number().int(), status: z.number().int() }),
  }),
]);
export type PackerReply = z.infer<typeof packerReply>;
