import { finalCost, formatUsdCents } from '@gpufarm/shared';
import type { Address, Hex } from 'viem';
import { indexOutputArtifact } from '../artifacts/output-index.js';
import { listAssignmentArtifacts } from '../artifacts/store.js';
import { recordCompletion } from '../jobs/settlement.js';
import { applyTransition, findJobById } from '../jobs/store.js';
import { transitionFor } from '../jobs/transitions.js';
import { appendServiceLine } from '../logs/store.js';
import { releaseAssignmentGpus } from '../machines/gpus-store.js';
import { recordHashMismatch } from '../machines/store.js';
import { billedRuntimeSeconds } from './billed-runtime.js';
import { serverNow, type ExecutionDeps } from './deps.js';
import { findAssignment, findMachineFacts, findMachineStanding, moveAssignment } from './store.js';
import { canaryExpected, canaryIterations, readSoleTarFile, verify, type CanaryCheck, type ExecutionEvidence } from './verification.js';

/** Why a completion cannot be sent: the escrow pays the farm's payout address, and there is none. */
const NO_PAYOUT = 'the farm has no payout address';

/**
 * Settles an assignment the machine reported `finished`: compares the reported hashes with the
 * server's, verifies (canary recomputation, signed execution record), prices the run (billable
 * GPU-seconds at the matched price plus the fee, never above the escrowed maximum; the runtime
 * on the server's clock, or the machine's when shorter: `billedRuntimeSeconds`), sends the
 * escrow completion and moves the job RUNNING -> COMPLETED (or TIMED_OUT). Idempotent: a second
 * call for a settled assignment does nothing, and a completion already recorded is not sent
 * again. Throws when the chain refuses or is down; the execution worker calls it again.
 */
export async function settleFinished(deps: ExecutionDeps, assignmentId: string): Promise<void> {
  const asg = await findAssignment(deps.db, assignmentId);
  if (!asg || asg.state !== 'running' || asg.agent_state !== 'finished') return;
  const job = await findJobById(deps.db, asg.job_id);
  const machine = await findMachineFacts(deps.db, asg.machine_id);
  const standing = await findMachineStanding(deps.db, asg.id);
  if (!job || !machine || !standing || job.status !== 'RUNNING' || job.assignment_id !== asg.id) return;

  const stored = await listAssignmentArtifacts(deps.db, asg.id);
  const reported = asg.outputs ?? [];
  const outputs: ExecutionEvidence['outputs'] = reported.map((o, i) => ({
    path: o.path,
    hostSha256: o.sha256,
    serverSha256: stored.get(o.name ?? `output-${i}`)?.sha256 ?? null,
  }));
  const primary = stored.get(reported[0]?.name ?? 'output-0') ?? null;
  // The agent leaves out an output over its rule's maxBytes, or whose files the job left
  // unpackable: the job's own doing, billed all the same. Its note says which (an agent before
  // protocol 5 sends none: then it was the limit).
  // Lines name each rule by the job's own spec, not by what the agent wrote in its note.
  const notes = asg.output_notes ?? [];
  const ruleNotes = (asg.spec.outputRules ?? []).map((rule, i) => ({
    rule,
    stored: reported.some((o, j) => (o.name ?? `output-${j}`) === `output-${i}`),
    note: notes.find((n) => n.name === `output-${i}`) ?? null,
  }));
  const logArtifact = stored.get('log') ?? null;
  const spec = job.spec as { image: string; imageDigest?: string | null; command?: string[] };
  const pinnedDigest = spec.imageDigest ?? (spec.image.includes('@') ? spec.image.slice(spec.image.indexOf('@') + 1) : null);
  const evidence: ExecutionEvidence = {
    assignmentId: asg.id,
    jobId: job.id,
    pinnedDigest,
    ranDigest: asg.image_digest,
    command: asg.spec.command,
    // The signed record states the machine's own clock: it is checked against what the machine reported, not the server's times.
    startedAt: asg.reported_started_at,
    finishedAt: asg.reported_finished_at,
    exitCode: asg.exit_code,
    oomKilled: asg.oom_killed,
    timedOut: asg.timed_out,
    outputs,
    logServerSha256: logArtifact?.sha256 ?? null,
    record: asg.record_json && asg.record_signature ? { json: asg.record_json, signature: asg.record_signature } : null,
    publicKeyPem: machine.public_key_pem,
    machine: standing,
  };

  // The canary's chain is a verifier for a job that declared its result reproducible (`deterministic`).
  const canaryRun = canaryIterations(deps.config.canaryImage, { image: spec.image, imageDigest: pinnedDigest, command: spec.command ?? [] });
  const iterations = job.deterministic ? canaryRun : null;
  const canary = iterations === null ? null : await checkCanary(deps, { jobId: job.id, iterations, primarySha256: primary?.sha256 ?? null, exitCode: asg.exit_code, ranDigest: asg.image_digest });
  const { level, reason } = verify(evidence, canary);
  const hashesMatch = primary !== null && reported[0] !== undefined && primary.sha256 === reported[0].sha256;
  const mismatched = outputs.some((o) => o.serverSha256 !== null && o.serverSha256 !== o.hostSha256);

  const timedOut = asg.timed_out === true;
  const runtime = billedRuntimeSeconds({
    server: { startedAt: asg.started_at, finishedAt: asg.finished_at ?? serverNow(deps) },
    reported: { startedAt: asg.reported_started_at, finishedAt: asg.reported_finished_at },
    maxRuntimeSeconds: job.max_runtime_seconds,
  });
  const runtimeSeconds = runtime.billed;
  const price = Number(asg.price_per_gpu_hour_micro_usd);
  const cost = finalCost({ runtimeSeconds, minBillingSeconds: job.min_billing_seconds, gpuCount: job.gpu_count, pricePerGpuHourMicroUsd: price, platformFeeBps: job.platform_fee_bps });

  // Each stored output tar's file list, read now from the bytes just verified (it is what the job
  // page lists and serves files from). A store failure leaves it unlisted and never holds the settlement up.
  for (const artifact of stored.values()) {
    if (artifact.kind !== 'output') continue;
    await indexOutputArtifact(deps, artifact).catch((err: unknown) => deps.log?.warn({ jobId: asg.job_id, assignmentId: asg.id, machineId: asg.machine_id, artifactId: artifact.id, err }, `indexing the output ${artifact.id} of assignment ${asg.id} failed; it is not listed`));
  }

  // The completion goes on chain first: the job turns COMPLETED with its receipt, never before it.
  if (deps.escrow && job.fund_tx_hash && job.settlement_status === null) {
    if (!machine.payout_address) throw new Error(`${NO_PAYOUT} (farm ${machine.farm_slug}); set it to settle job ${job.id}`);
    const resultHash = `0x${primary?.sha256 ?? '0'.repeat(64)}` as Hex;
    await recordCompletion({ db: deps.db, escrow: deps.escrow }, { jobId: job.id, runtimeSeconds, pricePerGpuHourMicroUsd: price, resultHash, provider: machine.payout_address as Address });
  }

  await deps.db.transaction(async (tx) => {
    const done = await moveAssignment(tx, { id: asg.id, machineId: null, from: ['running'], to: 'finished' });
    if (!done) return;
    await releaseAssignmentGpus(tx, asg.id);
    if (mismatched) await recordHashMismatch(tx, asg.machine_id);
    const transition = transitionFor('RUNNING', timedOut ? 'time_out' : 'complete');
    const moved = await applyTransition(tx, {
      jobId: job.id,
      from: 'RUNNING',
      to: transition.to,
      assignmentId: asg.id,
      set: {
        verification_level: level,
        host_hash: reported[0]?.sha256 ?? null,
        server_hash: primary?.sha256 ?? null,
        hashes_match: hashesMatch,
        output_artifact_id: primary?.id ?? null,
        log_artifact_id: logArtifact?.id ?? null,
        billable_gpu_seconds: cost.billableGpuSeconds,
        compute_micro_usd: cost.computeMicroUsd,
        fee_micro_usd: cost.feeMicroUsd,
        total_micro_usd: cost.totalMicroUsd,
      },
    });
    if (!moved) return;
    if (mismatched) await appendServiceLine(tx, job.id, 'hash mismatch: an output the machine reported differs from what the server stored; recorded against the machine');
    for (const { rule, stored, note } of ruleNotes) {
      const line = stored
        ? note?.kind === 'skipped' ? `output ${rule.path}: ${note.message}` : null
        : note?.kind === 'unpackable'
          ? `output ${rule.path} could not be packed from the job's own files (${note.message}): not stored; the job is billed for the time it ran`
          : `output ${rule.path} passed its ${rule.maxBytes}-byte limit (outputRules): not stored; the job is billed for the time it ran`;
      if (line) await appendServiceLine(tx, job.id, line);
    }
    const why = level === 'HOST_REPORTED' ? `as the machine reports it: ${reason}` : reason;
    const undeclared = canaryRun !== null && iterations === null ? '; the canary result is recomputed only for a job created with deterministic: true' : '';
    await appendServiceLine(tx, job.id, `verified: ${level} (${why}${undeclared})${primary ? `; output sha256 ${primary.sha256}` : '; no output stored'}`);
    await appendServiceLine(
      tx,
      job.id,
      `${timedOut ? 'timed out' : 'completed'}: ${cost.billableGpuSeconds} billable GPU-seconds at $${formatUsdCents(price)}/GPU-hour, total $${formatUsdCents(cost.totalMicroUsd)} (fee included); ${runtimeText(runtime, job.max_runtime_seconds)}`,
    );
  });
}

/** How the billed runtime came about, for the completion line: both clocks' figures, and the cap. */
function runtimeText(runtime: ReturnType<typeof billedRuntimeSeconds>, maxRuntimeSeconds: number): string {
  const seen = `${runtime.server} s from the start to the end as the service received them`;
  const why = runtime.reported === null ? seen : `the shorter of ${seen} and ${runtime.reported} s as the machine reports them`;
  const capped = Math.min(runtime.server, runtime.reported ?? runtime.server) > maxRuntimeSeconds ? ', capped at maxRuntimeSeconds' : '';
  return `runtime ${runtime.billed} s: ${why}${capped}`;
}

/**
 * Recomputes the canary's chain and compares it with the stored output: matched only when the
 * machine reports exit 0 on the canary image and the output artifact holds `result.txt` alone,
 * equal to `sha256^n(jobId)`.
 */
async function checkCanary(
  deps: ExecutionDeps,
  run: { jobId: string; iterations: number; primarySha256: string | null; exitCode: number | null; ranDigest: string | null },
): Promise<CanaryCheck> {
  if (run.primarySha256 === null) return { matched: false, gap: 'the canary stored no output' };
  if (run.exitCode !== 0) return { matched: false, gap: `the canary exited with code ${String(run.exitCode)}` };
  if (run.ranDigest !== deps.config.canaryImage?.digest) return { matched: false, gap: `the machine reports running ${run.ranDigest ?? 'no digest'}, not the canary image` };
  const text = await readSoleTarFile(deps.blobs.open(run.primarySha256), 'result.txt');
  if (text === null) return { matched: false, gap: "the canary's output does not hold result.txt alone (it is missing, repeated, or beside other files)" };
  if (text !== (await canaryExpected(run.jobId, run.iterations))) return { matched: false, gap: "the canary's result.txt does not match the server's recomputation of the sha256 chain" };
  return { matched: true };
}
