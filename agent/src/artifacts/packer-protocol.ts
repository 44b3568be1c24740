import { z } from 'zod';
import { assignmentOutputRuleSchema } from '@gpufarm/shared';

/** What `OffThreadPacker` asks its worker (off-thread.ts, pack-worker.ts). */
export const packerRequest = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('open'),
    id: z.number().int(),
    artifact: z.discriminatedUnion('kind', [
      z.object({ kind: z.literal('rule'), outputDir: z.string(), rule: assignmentOutputRuleSchema }),
      z.object({ kind: z.literal('file'), path: z.string(), limitBytes: z.number().int().positive() }),
    ]),
  }),
  /** The main thread's stream took this many chunks: the worker may send as many more. */
  z.object({ type: z.literal('taken'), id: z.number().int(), chunks: z.number().int().positive() }),
  z.object({ type: z.literal('cancel'), id: z.number().int() }),
]);
export type PackerRequest = z.infer<typeof packerRequest>;

/** What the worker answers: the artifact's bytes in order, then its digest or the error. */
export const packerReply = z.discriminatedUnion('type', [
  z.object({ type: z.literal('chunk'), id: z.number().int(), bytes: z.instanceof(ArrayBuffer) }),
  z.object({ type: z.literal('end'), id: z.number().int(), digest: z.object({ sha256: z.string(), sizeBytes: z.number().int() }) }),
  z.object({
    type: z.literal('error'),
    id: z.number().int(),
    message: z.string(),
    /** Set when the error was `ArtifactTooLargeError`, which the main thread throws again. */
    tooLarge: z.object({ limitBytes: z.number(), path: z.string() }).nullable(),
  }),
]);
export type PackerReply = z.infer<typeof packerReply>;
