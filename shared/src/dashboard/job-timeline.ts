import { z } from 'zod';
import { isoTimeSchema, txHashSchema } from '../schemas/common.js';

/**
 * `GET /dashboard/api/jobs/:id/timeline`: a dashboard-only view of a job's way, not part of /v1
 * (the public Job resource carries no per-state times). Each event is a state the job or its
 * escrow record reached, in the order it happened, with the time the service recorded it (null
 * when no record holds it) and, for escrow states, the transaction that made it.
 */
export const JOB_TIMELINE_STATES = [
  // The job's own states.
  'created',
  'funded',
  'queued',
  'assigned',
  'running',
  'completed',
  'failed',
  'timed_out',
  'canceled',
  'expired',
  // The escrow's record: completeJob sent (its `at` is when it was recorded), the end of the
  // challenge window (`at` may be ahead), then the way the money went.
  'completion_recorded',
  'challenge_window_ends',
  'approved',
  'released',
  'disputed',
  // Until when an admin may resolve the dispute (`at` may be ahead); past it the deposit goes back.
  'dispute_deadline',
  'resolved',
  'dispute_timed_out',
  'refund_authorized',
  'refunded',
] as const;
export const jobTimelineStateSchema = z.enum(JOB_TIMELINE_STATES);
export type JobTimelineState = z.infer<typeof jobTimelineStateSchema>;

export const jobTimelineEventSchema = z.strictObject({
  state: jobTimelineStateSchema,
  at: isoTimeSchema.nullable(),
  txHash: txHashSchema.nullable(),
});
export type JobTimelineEvent = z.infer<typeof jobTimelineEventSchema>;

export const jobTimelineSchema = z.strictObject({
  object: z.literal('job_timeline'),
  jobId: z.string().min(1),
  title: z.string().nullable(),
  createdAt: isoTimeSchema,
  /** The job's spec as the service accepted it (the body of `POST /v1/jobs` with its defaults written in): the job page shows it and "Run again" starts from it. */
  spec: z.record(z.string(), z.unknown()),
  events: z.array(jobTimelineEventSchema),
});
export type JobTimeline = z.infer<typeof jobTimelineSchema>;
