import { randomBytes, randomInt } from 'node:crypto';
import { challengePlan, type ChallengePlan, type GpuFamily, type MachineInventory, type VerificationState } from '@gpufarm/shared';
import type { Database, Queryable } from '../db/database.js';
import { randomId } from '../ids.js';
import { failVerification, keepVerifiedAfterDecline, markClaimsChanged, markVerified, setCurrentChallenge, startVerifying } from '../machines/verification-store.js';
import { notifyAgent } from '../dispatch/store.js';
import { claimChange, claimFingerprint, probeEvidenceMissing, simulatedRefusal, type ClaimFingerprint } from './claims.js';

/**
 * The SQL of machine verification (its verification columns of `machines` are written through
 * `machines/verification-store.ts`, the machines slice's): a machine is offered only once its GPUs passed a GPU
 * challenge (`gpu_challenges`, docs/decisions.md "GPU proof"); `machines.verification` says
 * where it stands: unverified (enrolled, or its driver or GPUs changed) → verifying (a challenge
 * is out) → verified | failed (with the reason). A challenge runs only while no GPU of the
 * machine is held by a job, and a verifying machine is matched to none, so the two never meet.
 */

/** A failed verification is tried again after this long (or at the agent's next hello). */
export const CHALLENGE_RETRY_SECONDS = 600;
/** From prepare to ready: the agent sets up the program (the gpu-bench image, the driver, B). */
export const CHALLENGE_READY_SECONDS = 300;
/** From go to the commitment on a simulated machine, which has no class window. */
export const SIMULATED_COMMIT_SECONDS = 120;
/** From open to the openings: the machine recomputes one round per opened row. */
export const CHALLENGE_OPEN_SECONDS = 120;
/** A verified machine is challenged again at a random time this long after its last pass, when idle. */
export const IDLE_CHALLENGE_HOURS = { min: 12, max: 24 } as const;

export type { VerificationState };
export type ChallengeCause = 'enrollment' | 'claims_changed' | 'retry' | 'idle';
export type ChallengeState = 'preparing' | 'running' | 'opening' | 'passed' | 'failed';

/** A challenge as stored: its plan, and what happened to it. */
export interface ChallengeRow extends ChallengePlan {
  id: string;
  machineId: string;
  cause: ChallengeCause;
  state: ChallengeState;
  simulated: boolean;
  classId: string | null;
  gpus: Array<{ index: number; uuid: string }>;
  preSeed: string;
  goSeed: string | null;
  roots: Record<string, string> | null;
  gpuSeconds: Record<string, number> | null;
  opened: Array<{ uuid: string; round: number; row: number }> | null;
  elapsedMs: number | null;
  checkMs: number | null;
  reason: string | null;
  createdAt: Date;
  goAt: Date | null;
  committedAt: Date | null;
  finishedAt: Date | null;
}

const CHALLENGE_COLUMNS = `id, machine_id AS "machineId", cause, state, simulated, class_id AS "classId", m, n, k, rounds, checks,
  expected_seconds AS "expectedSeconds", deadline_seconds AS "deadlineSeconds", gpus, pre_seed AS "preSeed", go_seed AS "goSeed",
  roots, gpu_seconds AS "gpuSeconds", opened, elapsed_ms AS "elapsedMs", check_ms AS "checkMs", reason,
  created_at AS "createdAt", go_at AS "goAt", committed_at AS "committedAt", finished_at AS "finishedAt"`;

/**
 * A changed inventory (hello or heartbeat): when the driver or GPUs differ from what the last
 * challenge covered, the machine is unverified again (not offered) until a new one passes.
 * Returns the change when there was one.
 */
export async function noteClaims(db: Queryable, machineId: string, inventory: MachineInventory): Promise<string | null> {
  const [row] = await db.query<{ verification: VerificationState; verified_fingerprint: ClaimFingerprint | null }>(
    'SELECT verification, verified_fingerprint FROM machines WHERE id = $1',
    [machineId],
  );
  if (!row || row.verification === 'unverified' || row.verified_fingerprint === null) return null;
  const change = claimChange(row.verified_fingerprint, claimFingerprint(inventory));
  if (change === null) return null;
  await markClaimsChanged(db, machineId, { reason: `the driver or GPUs changed since the last GPU challenge (${change}); a new one runs`, from: row.verification });
  return change;
}

/**
 * Which machines are due a challenge (`$1`: seconds before a failed one is retried; `$2`:
 * whether simulated machines are allowed): unverified, failed long enough ago, verified and due
 * their idle re-check, or simulated and verified on a deployment that no longer allows them (so
 * the refusal's reason is recorded).
 */
const DUE_FOR_CHALLENGE = `(m.verification = 'unverified'
    OR (m.verification = 'failed' AND (m.verification_started_at IS NULL OR m.verification_started_at <= now() - make_interval(secs => $1)))
    OR (m.verification = 'verified' AND m.next_challenge_at IS NOT NULL AND m.next_challenge_at <= now())
    OR (m.verification = 'verified' AND m.simulated AND NOT $2::boolean))`;

/** The machines due a challenge: connected (online, not draining) and `DUE_FOR_CHALLENGE`. */
export async function machinesDueForChallenge(db: Queryable, params: { retryFailedAfterSeconds: number; allowSimulated: boolean; machineId?: string }): Promise<string[]> {
  const rows = await db.query<{ id: string }>(
    `SELECT id FROM machines m
      WHERE token_hash IS NOT NULL AND status = 'online' AND NOT draining AND NOT drain_requested AND ($3::text IS NULL OR id = $3)
        AND ${DUE_FOR_CHALLENGE}
      ORDER BY id LIMIT 500`,
    [params.retryFailedAfterSeconds, params.allowSimulated, params.machineId ?? null],
  );
  return rows.map((r) => r.id);
}

export type ChallengeStart = { started: true; challengeId: string } | { started: false; reason: string | null };

interface GpuRow {
  gpu_index: number;
  uuid: string | null;
  class_id: string;
  busy: boolean;
  assignment_id: string | null;
  expected_matmul_gflops: string;
  family: GpuFamily;
}

/**
 * The GPUs one challenge covers: those of one class (the timing window is a class's), the
 * first class none of whose GPUs passed since `since` (null: none passed yet in this cycle).
 */
async function nextGroup(tx: Queryable, machineId: string, since: Date | null): Promise<{ gpus: GpuRow[]; busy: boolean }> {
  const gpus = await tx.query<GpuRow>(
    `SELECT g.gpu_index, g.uuid, g.class_id, g.busy, g.assignment_id, c.expected_matmul_gflops, c.family
       FROM machine_gpus g JOIN gpu_classes c ON c.class_id = g.class_id
      WHERE g.machine_id = $1 ORDER BY g.gpu_index`,
    [machineId],
  );
  const usable = gpus.filter((g) => g.uuid !== null);
  const busy = usable.some((g) => g.busy || g.assignment_id !== null);
  const passed = new Set<string>();
  if (since !== null) {
    const rows = await tx.query<{ uuid: string }>(
      `SELECT DISTINCT x.uuid FROM gpu_challenges c, jsonb_to_recordset(c.gpus) AS x(uuid text)
        WHERE c.machine_id = $1 AND c.state = 'passed' AND c.created_at >= $2`,
      [machineId, since],
    );
    for (const r of rows) passed.add(r.uuid);
  }
  const first = usable.find((g) => !passed.has(g.uuid!));
  if (!first) return { gpus: [], busy };
  return { gpus: usable.filter((g) => g.class_id === first.class_id), busy };
}

/** Inserts a challenge on `gpus` and tells the machine's link (`challenge` notice, sent on commit). */
async function insertChallenge(tx: Queryable, params: { machineId: string; cause: ChallengeCause; simulated: boolean; gpus: GpuRow[]; plan?: ChallengePlan }): Promise<string> {
  const first = params.gpus[0]!;
  const plan =
    params.plan ?? (params.simulated ? challengePlan('simulated') : challengePlan({ expectedMatmulGflops: Number(first.expected_matmul_gflops), family: first.family }));
  const id = randomId('chl');
  await tx.query(
    `INSERT INTO gpu_challenges (id, machine_id, cause, state, simulated, class_id, m, n, k, rounds, checks, expected_seconds, deadline_seconds, gpus, pre_seed)
     VALUES ($1, $2, $3, 'preparing', $4, $5, $6, $7, $8, $9, $10, $11, $12, $13::jsonb, $14)`,
    [
      id,
      params.machineId,
      params.cause,
      params.simulated,
      params.simulated ? null : first.class_id,
      plan.m,
      plan.n,
      plan.k,
      plan.rounds,
      plan.checks,
      plan.expectedSeconds,
      plan.deadlineSeconds,
      JSON.stringify(params.gpus.map((g) => ({ index: g.gpu_index, uuid: g.uuid! }))),
      randomBytes(32).toString('hex'),
    ],
  );
  await notifyAgent(tx, { machineId: params.machineId, kind: 'challenge', challengeId: id });
  return id;
}

/**
 * Puts a challenge out when the machine is still due (checked again under its row lock) and no
 * GPU of it is held by a job: the machine `verifying` the claims of its stored inventory. A
 * simulated machine where they are not allowed, or real GPUs without probe evidence, make it
 * `failed` with the reason instead. `plan` replaces the class's plan (tests).
 */
export async function startChallenge(
  db: Database,
  params: { machineId: string; retryFailedAfterSeconds: number; allowSimulated: boolean; plan?: ChallengePlan },
): Promise<ChallengeStart> {
  return db.transaction(async (tx) => {
    const [m] = await tx.query<{ id: string; inventory: MachineInventory | null; verification: VerificationState; verified_fingerprint: ClaimFingerprint | null }>(
      `SELECT m.id, m.inventory, m.verification, m.verified_fingerprint
         FROM machines m
        WHERE m.id = $3 AND m.token_hash IS NOT NULL AND m.status = 'online' AND NOT m.draining AND NOT m.drain_requested
          AND ${DUE_FOR_CHALLENGE}
        FOR UPDATE OF m`,
      [params.retryFailedAfterSeconds, params.allowSimulated, params.machineId],
    );
    if (!m || !m.inventory) return { started: false, reason: null };
    const fail = async (reason: string): Promise<ChallengeStart> => {
      await failVerification(tx, m.id, { reason, restart: true });
      return { started: false, reason };
    };
    const refused = simulatedRefusal(m.inventory.simulated, params.allowSimulated);
    if (refused !== null) return fail(refused);
    const evidence = probeEvidenceMissing(m.inventory);
    if (evidence !== null) return fail(evidence);
    const group = await nextGroup(tx, m.id, null);
    // Nothing of a catalog class to offer: nothing to prove until there is. A GPU held by a
    // job: never beside it; the sweep tries again once the machine is idle.
    if (group.gpus.length === 0 || group.busy) return { started: false, reason: null };
    const cause: ChallengeCause =
      m.verification === 'verified' ? 'idle' : m.verification === 'failed' ? 'retry' : m.verified_fingerprint === null ? 'enrollment' : 'claims_changed';
    const challengeId = await insertChallenge(tx, { machineId: m.id, cause, simulated: m.inventory.simulated, gpus: group.gpus, ...(params.plan ? { plan: params.plan } : {}) });
    await startVerifying(tx, m.id, { challengeId, fingerprint: claimFingerprint(m.inventory) });
    return { started: true, challengeId };
  });
}

export async function findChallenge(db: Queryable, challengeId: string): Promise<ChallengeRow | null> {
  const [row] = await db.query<ChallengeRow>(`SELECT ${CHALLENGE_COLUMNS} FROM gpu_challenges WHERE id = $1`, [challengeId]);
  return row ?? null;
}

/** The machine's recent challenges, newest first (the admins' machine page). */
export async function recentChallenges(db: Queryable, machineId: string, limit = 10): Promise<ChallengeRow[]> {
  return db.query<ChallengeRow>(`SELECT ${CHALLENGE_COLUMNS} FROM gpu_challenges WHERE machine_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2`, [machineId, limit]);
}

/** The challenges of a machine now out (preparing, running or opening). */
export async function openChallenges(db: Queryable, machineId: string): Promise<ChallengeRow[]> {
  return db.query<ChallengeRow>(`SELECT ${CHALLENGE_COLUMNS} FROM gpu_challenges WHERE machine_id = $1 AND state IN ('preparing', 'running', 'opening') ORDER BY created_at`, [machineId]);
}

/** The go: the fresh seed, stored before it is sent. False when the challenge is no longer preparing. */
export async function markGo(db: Queryable, challengeId: string, goSeed: string): Promise<boolean> {
  const rows = await db.query(`UPDATE gpu_challenges SET state = 'running', go_seed = $2, go_at = now() WHERE id = $1 AND state = 'preparing' RETURNING id`, [challengeId, goSeed]);
  return rows.length > 0;
}

/** The commitment and the rows drawn to open. False when the challenge is no longer running. */
export async function recordCommit(
  db: Queryable,
  challengeId: string,
  commit: { roots: Record<string, string>; gpuSeconds: Record<string, number>; elapsedMs: number; opened: ChallengeRow['opened'] },
): Promise<boolean> {
  const rows = await db.query(
    `UPDATE gpu_challenges SET state = 'opening', roots = $2::jsonb, gpu_seconds = $3::jsonb, elapsed_ms = $4, opened = $5::jsonb, committed_at = now()
      WHERE id = $1 AND state = 'running' RETURNING id`,
    [challengeId, JSON.stringify(commit.roots), JSON.stringify(commit.gpuSeconds), Math.round(commit.elapsedMs), JSON.stringify(commit.opened)],
  );
  return rows.length > 0;
}

/** Roots this machine committed in earlier challenges (a replayed commitment repeats them). */
export async function earlierRoots(db: Queryable, machineId: string, challengeId: string): Promise<Array<{ id: string; roots: Record<string, string> }>> {
  return db.query<{ id: string; roots: Record<string, string> }>(
    `SELECT id, roots FROM gpu_challenges WHERE machine_id = $1 AND id <> $2 AND roots IS NOT NULL ORDER BY created_at DESC LIMIT 50`,
    [machineId, challengeId],
  );
}

/** Draws the rows to open: `checks` per GPU, uniform over rounds and rows, from the OS's CSPRNG. */
export function drawRows(challenge: Pick<ChallengeRow, 'gpus' | 'rounds' | 'm' | 'checks'>): Array<{ uuid: string; round: number; row: number }> {
  return challenge.gpus.flatMap((g) => Array.from({ length: challenge.checks }, () => ({ uuid: g.uuid, round: randomInt(challenge.rounds), row: randomInt(challenge.m) })));
}

/** A random time for the next idle re-check, `IDLE_CHALLENGE_HOURS` after now. */
function nextIdleSeconds(): number {
  return randomInt(IDLE_CHALLENGE_HOURS.min * 3600, IDLE_CHALLENGE_HOURS.max * 3600);
}

/**
 * How a challenge ended. `declined`: the machine said it cannot run it now (`challenge.failed`),
 * rather than running it and failing.
 */
export type ChallengeOutcome = { passed: true; checkMs: number } | { passed: false; reason: string; checkMs?: number; declined?: boolean };

/**
 * An idle re-check the machine declined (a job it was finishing still held its GPUs, say) leaves
 * it verified, re-checked again after `CHALLENGE_RETRY_SECONDS`, while its last pass is younger
 * than this; past it, a declined re-check fails the machine like any other failure, so declining
 * cannot keep an old proof standing.
 */
export const IDLE_DECLINE_GRACE_HOURS = 48;

/**
 * The end of a challenge. Failed: the machine `failed` with the reason. Passed: the next class
 * of the machine's GPUs gets its challenge (a new one, returned), or, when every class passed
 * in this cycle, the machine is `verified` (proven, when its GPUs are real) until its next idle
 * re-check. Only the machine's current challenge moves it (one superseded by a change of the
 * driver or GPUs changes the challenge's row alone). Returns whether it was recorded here and
 * the next challenge, if one was started.
 */
export async function finishChallenge(db: Database, challengeId: string, outcome: ChallengeOutcome): Promise<{ recorded: boolean; next: string | null }> {
  return db.transaction(async (tx) => {
    const reason = outcome.passed ? null : outcome.reason.slice(0, 2000);
    const [c] = await tx.query<{ machine_id: string; cause: ChallengeCause; simulated: boolean }>(
      `UPDATE gpu_challenges SET state = $2, reason = $3, check_ms = COALESCE($4, check_ms), finished_at = now()
        WHERE id = $1 AND state IN ('preparing', 'running', 'opening') RETURNING machine_id, cause, simulated`,
      [challengeId, outcome.passed ? 'passed' : 'failed', reason, outcome.checkMs === undefined ? null : Math.round(outcome.checkMs)],
    );
    if (!c) return { recorded: false, next: null };
    const [m] = await tx.query<{ id: string; verification_started_at: Date | null }>(
      `SELECT id, verification_started_at FROM machines WHERE id = $1 AND challenge_id = $2 AND verification = 'verifying' FOR UPDATE`,
      [c.machine_id, challengeId],
    );
    if (!m) return { recorded: true, next: null };
    if (!outcome.passed) {
      if (outcome.declined === true && c.cause === 'idle') {
        const kept = await keepVerifiedAfterDecline(tx, m.id, { retrySeconds: CHALLENGE_RETRY_SECONDS, graceHours: IDLE_DECLINE_GRACE_HOURS });
        if (kept) return { recorded: true, next: null };
      }
      await failVerification(tx, m.id, { reason: `GPU challenge ${challengeId} failed: ${reason}`.slice(0, 2000), restart: false });
      return { recorded: true, next: null };
    }
    const group = await nextGroup(tx, m.id, m.verification_started_at);
    if (group.gpus.length > 0 && !group.busy) {
      const next = await insertChallenge(tx, { machineId: m.id, cause: c.cause, simulated: c.simulated, gpus: group.gpus });
      await setCurrentChallenge(tx, m.id, next);
      return { recorded: true, next };
    }
    await markVerified(tx, m.id, { idleRecheck: c.cause === 'idle', nextCheckSeconds: nextIdleSeconds() });
    return { recorded: true, next: null };
  });
}

/**
 * Challenges past their time: not ready within `CHALLENGE_READY_SECONDS`, no commitment by
 * the deadline (plus the ready allowance for the relay) or `SIMULATED_COMMIT_SECONDS`, no
 * openings within `CHALLENGE_OPEN_SECONDS`. Returns them with why, for `finishChallenge`.
 */
export async function overdueChallenges(db: Queryable): Promise<Array<{ id: string; machineId: string; reason: string }>> {
  const rows = await db.query<{ id: string; machineId: string; state: ChallengeState }>(
    `SELECT id, machine_id AS "machineId", state FROM gpu_challenges
      WHERE (state = 'preparing' AND created_at <= now() - make_interval(secs => $1))
         OR (state = 'running' AND go_at <= now() - make_interval(secs => COALESCE(deadline_seconds + 30, $2)))
         OR (state = 'opening' AND committed_at <= now() - make_interval(secs => $3))
      ORDER BY created_at LIMIT 500`,
    [CHALLENGE_READY_SECONDS, SIMULATED_COMMIT_SECONDS, CHALLENGE_OPEN_SECONDS],
  );
  const why: Record<ChallengeState, string> = {
    preparing: `the machine did not say ready within ${CHALLENGE_READY_SECONDS} s (is the agent connected, and can it start gpu-bench?)`,
    running: 'the machine sent no commitment in time',
    opening: `the machine did not send the opened rows within ${CHALLENGE_OPEN_SECONDS} s`,
    passed: '',
    failed: '',
  };
  return rows.map((r) => ({ id: r.id, machineId: r.machineId, reason: why[r.state] }));
}

/** A machine's verification as an operator reads it (the admin API), or null when unknown. */
export interface MachineVerificationRecord {
  machineId: string;
  status: string;
  healthReason: string | null;
  simulated: boolean;
  claimedTier: string | null;
  verification: VerificationState;
  verificationReason: string | null;
  challengeId: string | null;
  verifiedAt: Date | null;
  provenAt: Date | null;
  nextChallengeAt: Date | null;
  /** The claims the current or last challenge covers. */
  claims: ClaimFingerprint | null;
}

export async function findMachineVerification(db: Queryable, machineId: string): Promise<MachineVerificationRecord | null> {
  const [row] = await db.query<MachineVerificationRecord>(
    `SELECT id AS "machineId", status, health_reason AS "healthReason", simulated, benchmark_tier AS "claimedTier", verification,
            verification_reason AS "verificationReason", challenge_id AS "challengeId", verified_at AS "verifiedAt",
            proven_at AS "provenAt", next_challenge_at AS "nextChallengeAt", verified_fingerprint AS claims
       FROM machines WHERE id = $1`,
    [machineId],
  );
  return row ?? null;
}
