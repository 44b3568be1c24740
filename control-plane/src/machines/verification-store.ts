import type { Queryable } from '../db/database.js';

/**
 * The verification columns of `machines` (`verification`, its reason, the current challenge, the
 * claims it covers, when it was verified or proven, the next idle re-check). Machine verification
 * (`machine-verification/challenge-store.ts`) decides each move, inside its own transactions, and
 * calls here to write it: unverified → verifying → verified | failed.
 */

/** The driver or GPUs changed since the last challenge: unverified again, unless the verification moved meanwhile. */
export async function markClaimsChanged(db: Queryable, machineId: string, params: { reason: string; from: string }): Promise<void> {
  await db.query(
    `UPDATE machines SET verification = 'unverified', verification_reason = $2, updated_at = now() WHERE id = $1 AND verification = $3`,
    [machineId, params.reason, params.from],
  );
}

/**
 * The machine failed verification with `reason`. `restart`: the failure opens a new cycle (no
 * challenge could start), so the retry waits from now.
 */
export async function failVerification(tx: Queryable, machineId: string, params: { reason: string; restart: boolean }): Promise<void> {
  await tx.query(
    `UPDATE machines SET verification = 'failed', verification_reason = $2,
            verification_started_at = CASE WHEN $3 THEN now() ELSE verification_started_at END, updated_at = now()
      WHERE id = $1`,
    [machineId, params.reason, params.restart],
  );
}

/** A challenge is out: the machine is verifying the claims `fingerprint` names. */
export async function startVerifying(tx: Queryable, machineId: string, params: { challengeId: string; fingerprint: object }): Promise<void> {
  await tx.query(
    `UPDATE machines SET verification = 'verifying', verification_reason = NULL, challenge_id = $2, verification_started_at = now(),
            verified_fingerprint = $3::jsonb, updated_at = now()
      WHERE id = $1`,
    [machineId, params.challengeId, JSON.stringify(params.fingerprint)],
  );
}

/**
 * A declined idle re-check: the machine stays verified, re-checked again in `retrySeconds`, when
 * its last passed challenge is younger than `graceHours`. Returns whether it was kept.
 */
export async function keepVerifiedAfterDecline(tx: Queryable, machineId: string, params: { retrySeconds: number; graceHours: number }): Promise<boolean> {
  const kept = await tx.query(
    `UPDATE machines SET verification = 'verified', next_challenge_at = now() + make_interval(secs => $2), updated_at = now()
      WHERE id = $1 AND (SELECT max(finished_at) FROM gpu_challenges WHERE machine_id = $1 AND state = 'passed') > now() - make_interval(hours => $3)
      RETURNING id`,
    [machineId, params.retrySeconds, params.graceHours],
  );
  return kept.length > 0;
}

/** The machine's current challenge is now `challengeId` (the next class of its GPUs). */
export async function setCurrentChallenge(tx: Queryable, machineId: string, challengeId: string): Promise<void> {
  await tx.query('UPDATE machines SET challenge_id = $2, updated_at = now() WHERE id = $1', [machineId, challengeId]);
}

/**
 * Every class of the machine's GPUs passed: verified (proven when its GPUs are real) until its
 * next idle re-check in `nextCheckSeconds`. An idle re-check keeps the date the machine became
 * verified: it was offered all along.
 */
export async function markVerified(tx: Queryable, machineId: string, params: { idleRecheck: boolean; nextCheckSeconds: number }): Promise<void> {
  await tx.query(
    `UPDATE machines SET verification = 'verified', verification_reason = NULL,
            verified_at = CASE WHEN $2 AND verified_at IS NOT NULL THEN verified_at ELSE now() END,
            proven_at = CASE WHEN simulated THEN NULL ELSE now() END,
            next_challenge_at = now() + make_interval(secs => $3), updated_at = now()
      WHERE id = $1`,
    [machineId, params.idleRecheck, params.nextCheckSeconds],
  );
}
