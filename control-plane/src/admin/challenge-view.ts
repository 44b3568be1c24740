import type { ChallengeRow, MachineVerificationRecord } from '../machine-verification/challenge-store.js';

/**
 * What admins read of a machine's GPU proof (docs/decisions.md "GPU proof"), the same in the
 * admin-token API (`GET /admin/v1/machines/:id`) and the admin area's machine page.
 */

/** A GPU challenge as admins read it: its seeds, shape, times and the rows the server checked. */
export function challengeView(c: ChallengeRow) {
  const iso = (d: Date | null) => d?.toISOString() ?? null;
  return {
    id: c.id,
    cause: c.cause,
    state: c.state,
    simulated: c.simulated,
    classId: c.classId,
    shape: { m: c.m, n: c.n, k: c.k, rounds: c.rounds },
    gpus: c.gpus,
    preSeed: c.preSeed,
    goSeed: c.goSeed,
    expectedSeconds: c.expectedSeconds,
    deadlineSeconds: c.deadlineSeconds,
    elapsedSeconds: c.elapsedMs === null ? null : c.elapsedMs / 1000,
    gpuSeconds: c.gpuSeconds,
    rowsChecked: c.opened ?? [],
    checkMs: c.checkMs,
    reason: c.reason,
    createdAt: c.createdAt.toISOString(),
    goAt: iso(c.goAt),
    committedAt: iso(c.committedAt),
    finishedAt: iso(c.finishedAt),
  };
}

/**
 * Where a machine stands with its proof: its verification state and reason, whether its GPUs
 * are simulated (never proven), when they last passed a challenge on real GPUs, and when the
 * next idle re-check is due.
 */
export function gpuProofView(v: Pick<MachineVerificationRecord, 'verification' | 'verificationReason' | 'simulated' | 'challengeId' | 'verifiedAt' | 'provenAt' | 'nextChallengeAt'>) {
  return {
    verification: v.verification,
    reason: v.verificationReason,
    simulated: v.simulated,
    challengeId: v.challengeId,
    verifiedAt: v.verifiedAt?.toISOString() ?? null,
    provenAt: v.provenAt?.toISOString() ?? null,
    nextChallengeAt: v.nextChallengeAt?.toISOString() ?? null,
  };
}
