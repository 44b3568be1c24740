import { fieldDetail, GpufarmError, type AssignmentInput, type ErrorDetail } from '@gpufarm/shared';
import type { Queryable } from '../db/database.js';
import { isExpired } from './metadata.js';
import { findArtifacts } from './store.js';

/** A job's `inputs` item as the customer gave it. */
export interface JobInputRef {
  artifactId: string;
  mountName: string;
}

/** An input that cannot be handed to an agent: unknown on the account, or expired. */
export class JobInputUnavailableError extends GpufarmError<'input_unavailable'> {
  constructor(
    readonly artifactId: string,
    readonly reason: 'not_found' | 'expired',
  ) {
    super('input_unavailable', `${reason === 'expired' ? `input artifact ${artifactId} expired` : `no input artifact ${artifactId} on the job's account`}; upload it again and create a new job`);
  }
}

/**
 * Checks a job creation's `inputs` against the account: each `artifactId` must be an artifact
 * of `accountId` (any kind: an earlier job's output may feed a new job) that has not expired.
 * Returns one `validation_error` detail per offending input, named `inputs[i].artifactId`;
 * empty when all are usable.
 */
export async function checkJobInputs(db: Queryable, accountId: string, inputs: readonly JobInputRef[], now = Date.now()): Promise<ErrorDetail[]> {
  const rows = new Map((await findArtifacts(db, accountId, inputs.map((i) => i.artifactId))).map((r) => [r.id, r]));
  const details: ErrorDetail[] = [];
  inputs.forEach((input, i) => {
    const field = `inputs[${i}].artifactId`;
    const row = rows.get(input.artifactId);
    if (!row) details.push(fieldDetail(field, `no artifact ${input.artifactId} on this account`));
    else if (isExpired(row, now)) details.push(fieldDetail(field, `artifact ${input.artifactId} expired at ${row.expires_at.toISOString()}; upload it again`));
  });
  return details;
}

/**
 * The assignment's `inputs`: each of the job's inputs with its SHA-256, size and the URL the
 * agent fetches it from, `urlFor(mountName)`: the machine-authenticated route that hands out a
 * signed URL valid 120 s at the moment the agent downloads (`agent-inputs.ts`), so no URL sent
 * in an assignment outlives its use.
 *
 * @throws JobInputUnavailableError when an input is gone from the account or expired
 */
export async function resolveJobInputs(
  db: Queryable,
  urlFor: (mountName: string) => string,
  accountId: string,
  inputs: readonly JobInputRef[],
  now = Date.now(),
): Promise<AssignmentInput[]> {
  const rows = new Map((await findArtifacts(db, accountId, inputs.map((i) => i.artifactId))).map((r) => [r.id, r]));
  return inputs.map((input) => {
    const row = rows.get(input.artifactId);
    if (!row) throw new JobInputUnavailableError(input.artifactId, 'not_found');
    if (isExpired(row, now)) throw new JobInputUnavailableError(input.artifactId, 'expired');
    return { mountName: input.mountName, artifactId: row.id, url: urlFor(input.mountName), sha256: row.sha256, sizeBytes: Number(row.size_bytes) };
  });
}
