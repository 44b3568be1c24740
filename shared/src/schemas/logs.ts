import { z } from 'zod';
import { isoTimeSchema, nonNegativeIntSchema } from './common.js';
import { jobStatusSchema } from './job.js';

export const LOG_STREAMS = ['stdout', 'stderr', 'system'] as const;
export const logStreamSchema = z.enum(LOG_STREAMS);
export type LogStream = z.infer<typeof logStreamSchema>;

/**
 * `system` lines are the service's own (queued, matched, verified…). The machine's own notes
 * (pulling, started, egress decisions, exited with code…), which its agent sends as `system`,
 * are stored on `stderr` starting with this prefix: no machine can write a line that reads as
 * the platform's.
 */
export const MACHINE_NOTE_PREFIX = '[machine] ';

/** One log line; `seq` numbers the lines of one assignment from 0. */
export const logLineSchema = z.strictObject({
  id: z.int().positive(),
  assignmentId: z.string().min(1),
  seq: nonNegativeIntSchema,
  stream: logStreamSchema,
  line: z.string(),
  at: isoTimeSchema,
});
export type LogLine = z.infer<typeof logLineSchema>;

/** A log cursor: a non-negative integer as a canonical decimal string (`"0"` starts at the top). */
export const logCursorSchema = z.string().regex(/^(0|[1-9][0-9]{0,15})$/, { error: 'must be a non-negative integer cursor such as "0"' });

/**
 * `GET /v1/jobs/:id/logs`. `nextCursor` is never null: it stays the same while no new lines
 * arrive, so a client tails by repeating the call with it.
 */
export const logListSchema = z.strictObject({
  object: z.literal('list'),
  jobStatus: jobStatusSchema,
  nextCursor: logCursorSchema,
  data: z.array(logLineSchema),
});
export type LogList = z.infer<typeof logListSchema>;
