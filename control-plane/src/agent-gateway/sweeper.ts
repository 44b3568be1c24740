import type { ExecutionConfig } from '../config.js';

/**
 * Machine liveness, checked by every replica on a timer; each step is one statement
 * (`store.ts`), and the job changes it leads to are the lifecycle's guarded writes, so several
 * replicas sweeping at once change each row once.
 *
 * 1. An enrolled machine (online, unhealthy or draining) not heard from for
 *    `machineOfflineSeconds` goes offline (`offline_since` = now) and offers nothing.
 * 2. Accepted or running assignments of a machine offline for more than
 *    `machineLostGraceSeconds` are lost (the job is requeued or failed). A machine that says
 *    hello before that is online again and its jobs continue.
 * 3. Offered assignments not accepted within `assignTimeoutSeconds` are taken back as
 *    rejected with reason `timeout`.
 */

/**
 * The soonest a machine's accepted and running assignments can be requeued, counted from its
 * last heartbeat: offline after `machineOfflineSeconds`, lost `machineLostGraceSeconds` after
 * that (a later sweep only adds to it). Agents get it in `welcome` (`lostAfterSeconds`) and stop
 * their containers before it while they cannot reach the control plane.
 */
export function lostAfterSeconds(config: Pick<ExecutionConfig, 'machineOfflineSeconds' | 'machineLostGraceSeconds'>): number {
  return config.machineOfflineSeconds + config.machineLostGraceSeconds;
}
