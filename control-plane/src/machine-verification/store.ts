import { findGpuClass, JOB_SPEC_DEFAULTS, type MachineInventory } from '@gpufarm/shared';
import type { Database, Queryable } from '../db/database.js';
import { ensureServiceAccount } from '../auth/store.js';
import { newId, randomId } from '../ids.js';
import { insertServiceJob } from '../jobs/store.js';
import { appendServiceLine } from '../logs/store.js';
import { buildAssignmentSpec, matchedLine, type StoredJobSpec } from '../matching/assignment-spec.js';
import { writeMatches } from '../matching/store.js';
import { claimChange, claimFingerprint, probeEvidenceMissing, simulatedRefusal, type ClaimFingerprint } from './claims.js';

/**
 * The SQL of machine verification. A canary is a job of kind `verification` on the service's own
 * account (no escrow, no billing entry, listed to no customer), written straight onto the
 * machine with the matcher's own `writeMatches`, so the agent, the gateway, the log and upload
 * routes and settlement (`execution/finish.ts` recomputes the chain) treat it as any job.
 */

/** The service's own account and (revoked, unusable) API key, owners of the canary jobs. */
export const SERVICE_ACCOUNT_ID = 'acct_service';
const SERVICE_API_KEY_ID = 'key_service';
/** Links of the sha256 chain: a fraction of a second on the machine and on the server. */
export const CANARY_ITERATIONS = 100_000;
/** A canary that has not finished by then is a failed verification (TIMED_OUT). */
export const CANARY_MAX_RUNTIME_SECONDS = 300;
/** A failed verification is tried again after this long (or at the agent's next hello). */
export const CANARY_RETRY_SECONDS = 600;
/** At most this many GPUs go into one canary (a job's own limit). */
const CANARY_MAX_GPUS = 16;

export type VerificationState = 'unverified' | 'verifying' | 'verified' | 'failed';

/** The canary image, pinned (`ExecutionConfig.canaryImage`). */
export interface CanaryImage {
  repository: string;
  digest: string;
}

/**
 * A changed inventory (hello or heartbeat): when the driver or GPUs differ from what the last
 * canary covered, the machine is unverified again (not offered) until a new canary passes.
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
  await db.query(
    `UPDATE machines SET verification = 'unverified', verification_reason = $2, updated_at = now() WHERE id = $1 AND verification = $3`,
    [machineId, `the driver or GPUs changed since the last verification (${change}); a new canary runs`, row.verification],
  );
  return change;
}

/**
 * Which machines are due a verification (`$1`: seconds before a failed one is retried; `$2`:
 * whether simulated machines are allowed): unverified, failed long enough ago, or simulated and
 * verified on a deployment that no longer allows them (so the refusal's reason is recorded).
 */
const DUE_FOR_CANARY = `(m.verification = 'unverified'
    OR (m.verification = 'failed' AND (m.verification_started_at IS NULL OR m.verification_started_at <= now() - make_interval(secs => $1)))
    OR (m.verification = 'verified' AND m.simulated AND NOT $2::boolean))`;

/** The machines due a canary: connected (online, not draining) and `DUE_FOR_CANARY`. */
export async function machinesDueForCanary(db: Queryable, params: { retryFailedAfterSeconds: number; allowSimulated: boolean; machineId?: string }): Promise<string[]> {
  const rows = await db.query<{ id: string }>(
    `SELECT id FROM machines m
      WHERE token_hash IS NOT NULL AND status = 'online' AND NOT draining AND NOT drain_requested AND ($3::text IS NULL OR id = $3)
        AND ${DUE_FOR_CANARY}
      ORDER BY id LIMIT 500`,
    [params.retryFailedAfterSeconds, params.allowSimulated, params.machineId ?? null],
  );
  return rows.map((r) => r.id);
}

export type CanaryStart = { started: true; jobId: string; assignmentId: string } | { started: false; reason: string | null };

/**
 * Puts a canary on the machine when it is still due (checked again under its row lock): a
 * QUEUED verification job moved at once to MATCHING with its assignment offered on every GPU
 * of the machine (reserved, so no customer job takes them meanwhile), and the machine
 * `verifying` the claims of its stored inventory. A simulated machine where they are not
 * allowed, or without a canary image, or without probe evidence for real GPUs, the machine is
 * `failed` with the reason instead.
 */
export async function startCanary(
  db: Database,
  params: { machineId: string; canary: CanaryImage | null; retryFailedAfterSeconds: number; allowSimulated: boolean },
): Promise<CanaryStart> {
  return db.transaction(async (tx) => {
    const [m] = await tx.query<{ id: string; inventory: MachineInventory | null; price: number | null; region_key: string; farm_name: string }>(
      `SELECT m.id, m.inventory, m.price_per_gpu_hour_micro_usd AS price, m.region_key, f.name AS farm_name
         FROM machines m JOIN farms f ON f.id = m.farm_id
        WHERE m.id = $3 AND m.token_hash IS NOT NULL AND m.status = 'online' AND NOT m.draining AND NOT m.drain_requested
          AND ${DUE_FOR_CANARY}
        FOR UPDATE OF m`,
      [params.retryFailedAfterSeconds, params.allowSimulated, params.machineId],
    );
    if (!m || !m.inventory) return { started: false, reason: null };
    const fail = async (reason: string): Promise<CanaryStart> => {
      await tx.query(
        `UPDATE machines SET verification = 'failed', verification_reason = $2, verification_started_at = now(), updated_at = now() WHERE id = $1`,
        [m.id, reason],
      );
      return { started: false, reason };
    };
    const refused = simulatedRefusal(m.inventory.simulated, params.allowSimulated);
    if (refused !== null) return fail(refused);
    if (params.canary === null) return fail('no canary image is configured on the control plane (GF_CANARY_IMAGE), so the machine cannot be verified');
    const evidence = probeEvidenceMissing(m.inventory);
    if (evidence !== null) return fail(evidence);
    const gpus = await tx.query<{ gpu_index: number; uuid: string | null; class_id: string; busy: boolean; assignment_id: string | null }>(
      'SELECT gpu_index, uuid, class_id, busy, assignment_id FROM machine_gpus WHERE machine_id = $1 ORDER BY gpu_index',
      [m.id],
    );
    const usable = gpus.filter((g) => g.uuid !== null).slice(0, CANARY_MAX_GPUS);
    // Nothing of a catalog class to offer: nothing to verify until there is.
    if (usable.length === 0) return { started: false, reason: null };
    // A GPU still held by an earlier run: the next sweep tries again.
    if (usable.some((g) => g.busy || g.assignment_id !== null)) return { started: false, reason: null };

    await ensureServiceAccount(tx, { accountId: SERVICE_ACCOUNT_ID, keyId: SERVICE_API_KEY_ID, label: 'machine verification' });
    const jobId = randomId('job');
    const assignmentId = newId('asg');
    const classId = usable[0]!.class_id;
    const price = m.price === null ? 1 : Number(m.price);
    const image = `${params.canary.repository}@${params.canary.digest}`;
    const title = 'machine verification canary';
    const spec: StoredJobSpec = {
      image,
      command: ['sha256-chain', String(CANARY_ITERATIONS)],
      gpu: { count: usable.length },
      workloadType: JOB_SPEC_DEFAULTS.workloadType,
      maxRuntimeSeconds: CANARY_MAX_RUNTIME_SECONDS,
      networkPolicy: JOB_SPEC_DEFAULTS.networkPolicy,
      outputRules: [{ path: '/output', maxBytes: 1024 * 1024 }],
      // The sha256 chain is reproducible, and verification recomputes only deterministic jobs.
      deterministic: true,
      title,
    };
    await insertServiceJob(tx, {
      id: jobId,
      accountId: SERVICE_ACCOUNT_ID,
      apiKeyId: SERVICE_API_KEY_ID,
      kind: 'verification',
      spec,
      title,
      gpuCount: usable.length,
      workloadType: JOB_SPEC_DEFAULTS.workloadType,
      maxRuntimeSeconds: CANARY_MAX_RUNTIME_SECONDS,
      pricePerGpuHourMicroUsd: price,
    });
    const assignment = buildAssignmentSpec({ assignmentId, jobId, spec, maxRuntimeSeconds: CANARY_MAX_RUNTIME_SECONDS, gpus: usable.map((g) => ({ index: g.gpu_index, uuid: g.uuid! })), inputs: [] });
    await writeMatches(
      tx,
      [
        {
          assignmentId,
          jobId,
          machineId: m.id,
          attempt: 1,
          gpuIndices: usable.map((g) => g.gpu_index),
          classId,
          gpuModel: findGpuClass(classId)?.model ?? classId,
          priceMicroUsd: price,
          spec: assignment,
          line: `verification canary: ${matchedLine({ gpuCount: usable.length, classId, farmName: m.farm_name, regionKey: m.region_key, priceMicroUsd: price, attempt: 1 })}`,
        },
      ],
      { from: 'QUEUED', to: 'MATCHING' },
    );
    await tx.query(
      `UPDATE machines SET verification = 'verifying', verification_reason = NULL, verification_job_id = $2, verification_started_at = now(),
              verified_fingerprint = $3::jsonb, updated_at = now()
        WHERE id = $1`,
      [m.id, jobId, JSON.stringify(claimFingerprint(m.inventory))],
    );
    return { started: true, jobId, assignmentId };
  });
}

/**
 * The end of a canary job: its machine becomes `verified` when it passed, else `failed` with
 * the reason, and the canary's log says so. Only the machine's current canary counts (one
 * superseded by a change of the driver or GPUs does nothing). Returns whether a machine changed.
 */
export async function recordCanaryOutcome(db: Queryable, canary: { machineId: string; jobId: string }, outcome: { passed: boolean; reason: string | null }): Promise<boolean> {
  const reason = outcome.passed ? null : (outcome.reason ?? 'the canary failed').slice(0, 2000);
  const rows = await db.query<{ id: string }>(
    `UPDATE machines SET verification = $2, verification_reason = $3, verified_at = CASE WHEN $2 = 'verified' THEN now() ELSE verified_at END, updated_at = now()
      WHERE id = $4 AND verification_job_id = $1 AND verification = 'verifying' RETURNING id`,
    [canary.jobId, outcome.passed ? 'verified' : 'failed', reason, canary.machineId],
  );
  if (rows.length === 0) return false;
  await appendServiceLine(db, canary.jobId, outcome.passed ? 'machine verified: the canary result matches the server\'s recomputation' : `machine not verified: ${reason}`);
  return true;
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
  verificationJobId: string | null;
  verifiedAt: Date | null;
  /** The claims the current or last canary covers. */
  claims: ClaimFingerprint | null;
}

export async function findMachineVerification(db: Queryable, machineId: string): Promise<MachineVerificationRecord | null> {
  const [row] = await db.query<MachineVerificationRecord>(
    `SELECT id AS "machineId", status, health_reason AS "healthReason", simulated, benchmark_tier AS "claimedTier", verification,
            verification_reason AS "verificationReason", verification_job_id AS "verificationJobId", verified_at AS "verifiedAt",
            verified_fingerprint AS claims
       FROM machines WHERE id = $1`,
    [machineId],
  );
  return row ?? null;
}
