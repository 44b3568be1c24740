import { z } from 'zod';

/**
 * `GET /dashboard/api/jobs/:id/fit` (and `POST /dashboard/api/fit` for a spec not created yet,
 * `jobId` null): whether a machine offered now fits the job (dashboard only).
 * `waiting`: the job still waits for a machine; `fitting` machines fit the whole job at any
 * price, `matched` of them at or under its cap; `reasons`: why nothing matches, for a person.
 */
export const jobFitSchema = z.strictObject({
  object: z.literal('job_fit'),
  jobId: z.string().min(1).nullable(),
  waiting: z.boolean(),
  fitting: z.int().nonnegative(),
  matched: z.int().nonnegative(),
  reasons: z.array(z.string()),
});
export type JobFit = z.infer<typeof jobFitSchema>;
