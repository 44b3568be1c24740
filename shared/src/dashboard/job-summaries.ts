import { z } from 'zod';

/** How many jobs one `GET /dashboard/api/jobs/summaries` names at most: a page of the Jobs list. */
export const JOB_SUMMARIES_MAX = 100;

/**
 * `GET /dashboard/api/jobs/summaries?ids=…`: what the Jobs list shows of each job beyond the job
 * object (dashboard only): its title, image and creation time, for the account's jobs among `ids`.
 */
export const jobSummaryListSchema = z.strictObject({
  object: z.literal('list'),
  data: z.array(
    z.strictObject({
      jobId: z.string().min(1),
      title: z.string().nullable(),
      image: z.string().nullable(),
      createdAt: z.string().min(1),
    }),
  ),
});
export type JobSummaryList = z.infer<typeof jobSummaryListSchema>;
export type JobSummary = JobSummaryList['data'][number];
