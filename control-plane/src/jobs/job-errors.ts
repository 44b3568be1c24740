import { GpufarmError, type ErrorDetail } from '@gpufarm/shared';

/**
 * What the jobs use cases refuse, each with its spec code; the HTTP edge (`http/error-handler.ts`)
 * turns them into the error envelope, and any other caller reads `code`, `message` and `details`.
 */

/** The body is not a valid job, or this deployment cannot take it (`validation_error`); `details` name the fields. */
export class JobValidationError extends GpufarmError<'validation_error'> {
  constructor(details: ErrorDetail[]) {
    super('validation_error', details.map((d) => d.message).join('; '), { details });
  }
}

/** The workload policy refused the job (`policy_rejected`); `details` name the rule and field of each finding. */
export class JobPolicyRejectedError extends GpufarmError<'policy_rejected'> {
  constructor(message: string, details: ErrorDetail[]) {
    super('policy_rejected', message, { details });
  }
}

/** The job's state, or an earlier request with the same Idempotency-Key, forbids the request (`conflict`). */
export class JobConflictError extends GpufarmError<'conflict'> {
  constructor(message: string, details: ErrorDetail[] = []) {
    super('conflict', message, { details });
  }
}

/** No such job on the caller's account (`not_found`): another account's job is not shown to exist. */
export class JobNotFoundError extends GpufarmError<'not_found'> {
  constructor(jobId: string) {
    super('not_found', `No job ${jobId} on this account.`);
  }
}
