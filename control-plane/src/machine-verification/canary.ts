import type { VerificationLevel } from '@gpufarm/shared';
import type { ExecutionConfig } from '../config.js';
import type { Database } from '../db/database.js';
import { CANARY_MAX_RUNTIME_SECONDS, CANARY_RETRY_SECONDS, machinesDueForCanary, startCanary } from './store.js';

/**
 * When the control plane verifies a machine: a canary goes out at the agent's hello (a failed
 * verification is tried again then) and from the gateway's sweep (machines left unverified,
 * and failed ones after `CANARY_RETRY_SECONDS`).
 */

export interface CanaryDeps {
  db: Database;
  config: Pick<ExecutionConfig, 'canaryImage' | 'allowSimulatedMachines'>;
  log?: (message: string, err?: unknown) => void;
}

/** Starts the canaries that are due: of `machineId` only when given (a hello), else of every machine (the sweep). */
export async function scheduleCanaries(deps: CanaryDeps, params: { machineId?: string } = {}): Promise<void> {
  const retryFailedAfterSeconds = params.machineId === undefined ? CANARY_RETRY_SECONDS : 0;
  const allowSimulated = deps.config.allowSimulatedMachines;
  const due = await machinesDueForCanary(deps.db, { retryFailedAfterSeconds, allowSimulated, ...(params.machineId === undefined ? {} : { machineId: params.machineId }) });
  for (const machineId of due) {
    const start = await startCanary(deps.db, { machineId, canary: deps.config.canaryImage, retryFailedAfterSeconds, allowSimulated });
    if (!start.started && start.reason !== null) deps.log?.(`machine ${machineId} cannot be verified: ${start.reason}`);
  }
}

/**
 * The verdict on a settled canary (pure): it passed only when the server recomputed the same
 * chain (`RESULT_VERIFIED`) within its time.
 */
export function canaryVerdict(run: { level: VerificationLevel; timedOut: boolean; exitCode: number | null }): { passed: boolean; reason: string | null } {
  if (run.timedOut) return { passed: false, reason: `the canary did not finish within ${CANARY_MAX_RUNTIME_SECONDS} s` };
  if (run.level === 'RESULT_VERIFIED') return { passed: true, reason: null };
  if (run.exitCode !== 0) return { passed: false, reason: `the canary exited with code ${String(run.exitCode)}` };
  return { passed: false, reason: 'the canary\'s result.txt does not match the server\'s recomputation of the sha256 chain (or its output hash differs from what the server stored)' };
}
