/** Why starting an assignment failed; the codes are the protocol's `ASSIGNMENT_FAILURES`. */
export type RuntimeFailureCode = 'pull_failed' | 'digest_mismatch' | 'input_failed' | 'create_failed' | 'upload_failed' | 'lost' | 'internal';

/**
 * An infrastructure fault of the runtime (STYLE.md rule 7): the control plane retries the job
 * elsewhere. `cause` keeps the underlying error.
 */
export class RuntimeError extends Error {
  constructor(
    readonly code: RuntimeFailureCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'RuntimeError';
  }
}
