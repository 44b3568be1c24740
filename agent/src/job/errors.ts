import { GpufarmError } from '@gpufarm/shared';

/** Why starting an assignment failed; the codes are the protocol's `ASSIGNMENT_FAILURES`. */
export type RuntimeFailureCode = 'pull_failed' | 'digest_mismatch' | 'input_failed' | 'create_failed' | 'upload_failed' | 'lost' | 'internal' | 'gpu_lost';

/**
 * An infrastructure fault of the runtime: the control plane retries the job elsewhere, except
 * after a digest mismatch (the registry serves other bytes than the pinned digest, which no
 * machine would pull differently). `cause` keeps the underlying error.
 */
export class RuntimeError extends GpufarmError<RuntimeFailureCode> {
  constructor(code: RuntimeFailureCode, message: string, options: { cause?: unknown } = {}) {
    super(code, message, { ...options, retryable: code !== 'digest_mismatch' });
  }
}

/** `done` of a job the agent stopped supervising (see `JobHandle.detach`): the container runs on for the next agent. */
export class DetachedError extends GpufarmError<'detached'> {
  constructor(assignmentId: string) {
    super('detached', `stopped supervising ${assignmentId}`);
  }
}
