import { randomBytes } from 'node:crypto';
import { ulid } from 'ulid';
import { z } from 'zod';

/** Time-ordered, prefixed ids (`acct_01j…`): sortable, so keyset cursors can use them. */
export function newId(prefix: string): string {
  return `${prefix}_${ulid().toLowerCase()}`;
}

const BASE32 = '0123456789abcdefghjkmnpqrstvwxyz';

/** Prefixed ids that reveal nothing, not even when they were made (`job_` + 130 random bits). */
export function randomId(prefix: string): string {
  const bytes = randomBytes(26);
  let id = `${prefix}_`;
  for (const byte of bytes) id += BASE32[byte & 31];
  return id;
}

/** A job id as the API writes it (`randomId('job')`), with the message a malformed one gets. */
export const jobIdSchema = z.string().regex(/^job_[0-9a-z]{26}$/, 'is not a job id (job_…)');
