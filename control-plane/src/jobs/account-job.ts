import { z } from 'zod';
import type { Queryable } from '../db/database.js';
import { parseParams } from '../http/parse.js';
import { jobIdSchema } from '../ids.js';
import { JobNotFoundError } from './job-errors.js';
import { findJob, type JobRow } from './store.js';

export const jobParams = z.object({ id: jobIdSchema });

/**
 * The caller's job named by a route's `:id` (`/v1/jobs/:id…` and the dashboard's own job routes).
 * Throws `invalid_request` naming `id` for a malformed id, and JobNotFoundError (`not_found`) for
 * a missing job or another account's: its existence is not told.
 */
export async function requireAccountJob(db: Queryable, accountId: string, params: unknown): Promise<JobRow> {
  const { id } = parseParams(jobParams, params);
  const row = await findJob(db, accountId, id);
  if (!row) throw new JobNotFoundError(id);
  return row;
}
