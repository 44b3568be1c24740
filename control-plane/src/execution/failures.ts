import type { ASSIGNMENT_FAILURES } from '@gpufarm/shared';

/**
 * Why an assignment ended without a result, and what that means for its job: whether another
 * machine may try again (at most `MAX_ATTEMPTS` runs in all), whether this machine is kept away
 * from the job, and the words the customer reads in the job's log. Every code is a failure of
 * the machine or the service, so a job that ends FAILED is refunded; a job that broke its own
 * limits (an output over its rule, a long log) is not a failure: it completes and is billed.
 */
export type FailureCode = (typeof ASSIGNMENT_FAILURES)[number] | 'machine_lost' | 'gpu_failed' | 'machine_drained';

interface FailureRule {
  retried: boolean;
  excludeMachine: boolean;
  /** What failed, for the job's `system` line (the agent's own message follows it). */
  summary: string;
}

export const FAILURE_RULES: Readonly<Record<FailureCode, FailureRule>> = {
  pull_failed: { retried: true, excludeMachine: false, summary: 'the image could not be pulled' },
  // The registry serves other bytes than the pinned digest: no machine would do better.
  digest_mismatch: { retried: false, excludeMachine: false, summary: 'the image does not match its pinned digest' },
  input_failed: { retried: true, excludeMachine: false, summary: 'an input could not be downloaded or did not match its hash' },
  create_failed: { retried: true, excludeMachine: true, summary: 'the machine could not create the container' },
  upload_failed: { retried: true, excludeMachine: true, summary: 'the outputs could not be uploaded' },
  lost: { retried: true, excludeMachine: true, summary: 'the machine lost the container' },
  internal: { retried: true, excludeMachine: true, summary: 'the machine had an internal error' },
  // The container runtime took the GPUs from the running container (a Docker restart or a systemd
  // reload, the NVIDIA Container Toolkit's known issue): the machine's fault, and it may repeat there.
  gpu_lost: { retried: true, excludeMachine: true, summary: 'the job\'s container lost access to its GPUs on the machine' },
  machine_lost: { retried: true, excludeMachine: true, summary: 'the machine stopped answering' },
  // The control plane's own finding from the machine's GPU health reports (XID 79, DBE…).
  gpu_failed: { retried: true, excludeMachine: true, summary: 'a GPU of the machine failed' },
  // The machine was taken out of service (drain deadline): not the job's fault, nor one the machine repeats.
  machine_drained: { retried: true, excludeMachine: false, summary: 'the machine was drained' },
};

/** Runs of one job in all: the first and at most two retries. */
export const MAX_ATTEMPTS = 3;
