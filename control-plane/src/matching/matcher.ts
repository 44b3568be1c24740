import { findGpuClass, imageCacheKey } from '@gpufarm/shared';
import { JobInputUnavailableError } from '../artifacts/inputs.js';
import type { Database, Queryable } from '../db/database.js';
import { newId } from '../ids.js';
import { applyTransition } from '../jobs/store.js';
import { transitionFor } from '../jobs/transitions.js';
import { appendServiceLine } from '../logs/store.js';
import { buildAssignmentSpec, matchedLine, minVramOf, type ResolvedInput, type StoredJobSpec } from './assignment-spec.js';
import { holdingsOf, machineImagesOf, rememberedImageKeys, wantedLayerDigests, type ImageKeyOf, type MachineImages } from './image-holdings.js';
import { silentLogger, type Logger } from '../logger.js';
import { CandidatePool, type CandidateGpu, type CandidateUnit, type JobNeed, type PlannedMatch } from './plan.js';
import {
  anyQueuedJob,
  claimQueuedJobs,
  loadCandidates,
  loadJobHistory,
  loadReports,
  loadReportVersions,
  lockGpus,
  MatchWriteConflict,
  writeMatches,
  type ClaimedJob,
  type MatchRecord,
  type ReportVersion,
} from './store.js';

/**
 * Turns a job's inputs into downloadable artifacts (signed URLs, hashes, sizes) for its
 * assignment. Called inside the batch's transaction with its connection. Wired to
 * `artifacts/` `resolveJobInputs(db, signer, accountId, inputs, ttlSeconds)`.
 */
export type ResolveInputs = (
  db: Queryable,
  job: { id: string; accountId: string; assignmentId: string },
  inputs: ReadonlyArray<{ artifactId: string; mountName: string }>,
) => Promise<ResolvedInput[]>;

export interface MatcherDeps {
  db: Database;
  /** Needed only for jobs with `inputs`; without it such jobs stay QUEUED. */
  resolveInputs?: ResolveInputs;
  /** The clock (uptime windows). */
  now?: () => Date;
  /** Where a job that cannot be matched for a reason other than capacity is reported (lines with `jobId`); default nowhere. */
  log?: Logger;
}

export interface MatchOptions {
  /** Jobs claimed (and written) per transaction. Default 2000. */
  batchSize?: number;
  /** Also match machines without an agent (seeded machines, which never connect): benches only. */
  allowAgentless?: boolean;
  /**
   * Also match machines whose agent runs in simulated mode (`ExecutionConfig.allowSimulatedMachines`).
   * Off by default: a deployment with live keys never runs a customer's job on one.
   */
  allowSimulated?: boolean;
  /** Attempts to re-plan jobs whose GPUs another matcher took meanwhile, per batch. Default 4. */
  lockRounds?: number;
}

export interface MatchedJob {
  jobId: string;
  assignmentId: string;
  machineId: string;
  gpuIndices: number[];
  /** How long the job waited in QUEUED before this match. */
  queuedSeconds: number;
}

export interface MatchResult {
  /** Jobs looked at (claimed by this call). */
  considered: number;
  matched: MatchedJob[];
  /** Jobs left QUEUED because every fitting GPU was taken by another matcher during the call: worth another pass soon. */
  contended: number;
  batches: number;
}

const DEFAULT_BATCH = 2000;

/**
 * Matches QUEUED jobs (without a funding hold) to machines, in queue order, in batches of
 * `batchSize`, one transaction per batch. For each batch: claim the jobs
 * `FOR UPDATE SKIP LOCKED`; plan each job greedily in memory against the free GPUs loaded once
 * per call (before the first batch) (`plan.ts` says which machine fits and which is preferred); lock the planned GPU
 * rows `FOR UPDATE SKIP LOCKED`, re-planning jobs that lost a GPU to another matcher; then write
 * the reservations, assignments (`offered`), QUEUED → MATCHING moves, system lines and agent
 * notices in one statement each. Jobs nothing fits stay QUEUED.
 *
 * Safe with any number of concurrent matchers (replicas): claimed jobs and locked GPU rows are
 * disjoint, and every write is guarded by the state it expects.
 */
export async function matchQueuedJobs(deps: MatcherDeps, options: MatchOptions = {}): Promise<MatchResult> {
  const batchSize = options.batchSize ?? DEFAULT_BATCH;
  const allowAgentless = options.allowAgentless ?? false;
  const allowSimulated = options.allowSimulated ?? false;
  const lockRounds = options.lockRounds ?? 4;
  const now = deps.now ?? (() => new Date());
  const log = deps.log ?? silentLogger;
  const { from, to } = transitionFor('QUEUED', 'match');
  const result: MatchResult = { considered: 0, matched: [], contended: 0, batches: 0 };
  if (!(await anyQueuedJob(deps.db))) return result;

  const pool = new CandidatePool(await loadCandidates(deps.db, { allowAgentless, allowSimulated, now: now() }));
  if (pool.freeGpus === 0) return result;
  let afterSeq = 0;
  for (;;) {
    const batch = await deps.db.transaction(async (tx) => {
      const jobs = await claimQueuedJobs(tx, { afterSeq, limit: batchSize });
      if (jobs.length === 0) return null;
      const history = await loadJobHistory(tx, jobs.map((j) => j.id));
      const needs: Array<{ job: ClaimedJob; need: JobNeed }> = [];
      for (const job of jobs) {
        if (history.live.has(job.id)) {
          log.warn({ jobId: job.id }, `job ${job.id} is QUEUED but still holds a live assignment; not matched`);
          continue;
        }
        const spec = job.spec as StoredJobSpec;
        if ((spec.inputs?.length ?? 0) > 0 && !deps.resolveInputs) continue;
        needs.push({ job, need: needOf(job, spec, history.excluded.get(job.id)) });
      }
      await addImageHoldings(tx, deps.db, pool, needs.map((n) => n.need.imageKey));
      const planned = await planAndLock(tx, pool, needs, { allowAgentless, allowSimulated, lockRounds });
      const records: MatchRecord[] = [];
      for (const { job, match, priceMicroUsd } of planned.won) {
        const record = await recordFor(deps, tx, job, match, priceMicroUsd, (history.assignments.get(job.id) ?? 0) + 1, log);
        if (record) records.push(record);
        // Its GPUs stay free (locked by this batch until it commits).
        else pool.giveBack(match.unit, match.gpus);
      }
      await writeMatches(tx, records, { from, to });
      return { jobs, records, contended: planned.contended };
    });
    if (batch === null) break;
    result.batches += 1;
    result.considered += batch.jobs.length;
    result.contended += batch.contended;
    const waited = new Map(batch.jobs.map((j) => [j.id, j.queuedSeconds]));
    for (const r of batch.records) result.matched.push({ jobId: r.jobId, assignmentId: r.assignmentId, machineId: r.machineId, gpuIndices: r.gpuIndices, queuedSeconds: waited.get(r.jobId) ?? 0 });
    afterSeq = batch.jobs[batch.jobs.length - 1]!.seq;
    if (batch.jobs.length < batchSize) break;
  }
  return result;
}

function needOf(job: ClaimedJob, spec: StoredJobSpec, excluded: Set<string> | undefined): JobNeed {
  return {
    jobId: job.id,
    gpuCount: job.gpuCount,
    minVramBytes: minVramOf(spec),
    classIds: spec.gpu.modelAllowlist ?? null,
    capMicroUsd: Number(job.capMicroUsd),
    workloadType: job.workloadType,
    regionPreference: spec.regionPreference ?? null,
    excludedMachines: excluded ?? NO_MACHINES,
    provenOnly: spec.gpu.proven === true,
    imageKey: imageCacheKey(spec.image, spec.imageDigest ?? null),
  };
}

/** The image reports a matcher has read (as `machineImagesOf` reads them), by machine, with their versions: a report is read again only once a newer one is stored. */
interface ReportCache {
  reports: Map<string, { reportedAt: string; images: MachineImages }>;
  /** The reports' image names as matching reduces them, each parsed once. */
  keyOf: ImageKeyOf;
}
const reportCaches = new WeakMap<Database, ReportCache>();

/** The reports of `versions`, from `cache` where it holds that version, else read (and kept). */
async function reportsOf(tx: Queryable, cache: ReportCache, versions: readonly ReportVersion[]): Promise<MachineImages[]> {
  const stale = versions.filter((v) => cache.reports.get(v.machineId)?.reportedAt !== v.reportedAt).map((v) => v.machineId);
  for (const row of await loadReports(tx, stale)) cache.reports.set(row.machineId, { reportedAt: row.reportedAt, images: machineImagesOf(row, cache.keyOf) });
  return versions.flatMap((v) => cache.reports.get(v.machineId)?.images ?? []);
}

/**
 * Tells the pool who holds how much of the batch's images it does not know yet (image-aware
 * matching, `image-holdings.ts`): the reports of the machines holding them by name, then those
 * of the candidates holding any of their layers. Each is read once per version (`ReportCache`):
 * a batch reads the versions, and only reports stored since the last batch whole.
 */
async function addImageHoldings(tx: Queryable, db: Database, pool: CandidatePool, keys: ReadonlyArray<string | null>): Promise<void> {
  const fresh = [...new Set(keys)].filter((k): k is string => k !== null && !pool.knowsImage(k));
  if (fresh.length === 0) return;
  let cache = reportCaches.get(db);
  if (!cache) reportCaches.set(db, (cache = { reports: new Map(), keyOf: rememberedImageKeys() }));
  const naming = await reportsOf(tx, cache, await loadReportVersions(tx, { keys: fresh }));
  const named = new Set(naming.map((r) => r.machineId));
  const layers =
    naming.length === 0 ? [] : await reportsOf(tx, cache, await loadReportVersions(tx, { layers: wantedLayerDigests(fresh, naming), machineIds: pool.machineIds().filter((id) => !named.has(id)) }));
  pool.addImageHoldings(fresh, holdingsOf(fresh, [...naming, ...layers]));
}

const NO_MACHINES: ReadonlySet<string> = new Set();

const gpuKey = (machineId: string, index: number) => `${machineId}\u0000${index}`;

/**
 * Plans the jobs in order against the pool and locks the planned GPUs. A job that did not get
 * every GPU it was planned (another matcher holds or took one, or the machine stopped taking
 * jobs) gives back the GPUs it did lock, loses the others for good, and is planned again, up to
 * `lockRounds` times. Later jobs never take a GPU an earlier job of the batch was planned, so
 * queue order holds within a round.
 */
async function planAndLock(
  tx: Queryable,
  pool: CandidatePool,
  needs: ReadonlyArray<{ job: ClaimedJob; need: JobNeed }>,
  options: { allowAgentless: boolean; allowSimulated: boolean; lockRounds: number },
): Promise<{ won: Array<{ job: ClaimedJob; match: PlannedMatch; priceMicroUsd: number }>; contended: number }> {
  const won: Array<{ job: ClaimedJob; match: PlannedMatch; priceMicroUsd: number }> = [];
  /** GPUs this transaction holds but no winning job uses (their job lost another GPU). */
  const spare = new Map<string, number>();
  let pending = needs;
  let contended = 0;
  for (let round = 0; round < options.lockRounds && pending.length > 0; round++) {
    const plans: Array<{ job: ClaimedJob; match: PlannedMatch }> = [];
    for (const entry of pending) {
      const match = pool.take(entry.need);
      if (match) plans.push({ job: entry.job, match });
    }
    const toLock: Array<{ machineId: string; index: number }> = [];
    for (const { match } of plans) {
      for (const gpu of match.gpus) if (!spare.has(gpuKey(match.unit.machine.id, gpu.index))) toLock.push({ machineId: match.unit.machine.id, index: gpu.index });
    }
    const locked = await lockGpus(tx, { machineIds: toLock.map((g) => g.machineId), indices: toLock.map((g) => g.index), allowAgentless: options.allowAgentless, allowSimulated: options.allowSimulated });
    const price = new Map<string, number>(spare);
    for (const row of locked) price.set(gpuKey(row.machineId, row.index), Number(row.priceMicroUsd));
    const retry: Array<{ job: ClaimedJob; need: JobNeed }> = [];
    for (const { job, match } of plans) {
      const keys = match.gpus.map((g) => gpuKey(match.unit.machine.id, g.index));
      const prices = keys.map((k) => price.get(k));
      const got = match.gpus.filter((_, i) => prices[i] !== undefined);
      const current = prices[0];
      // The price is read again under the lock: a machine repriced above the cap is not taken.
      const ok = got.length === match.gpus.length && current !== undefined && current <= match.need.capMicroUsd;
      if (ok) {
        won.push({ job, match, priceMicroUsd: current });
        for (const k of keys) spare.delete(k);
        continue;
      }
      // Keep what is held for later plans; what could not be locked is gone from the pool.
      pool.giveBack(match.unit, got as CandidateGpu[]);
      for (let i = 0; i < keys.length; i++) if (prices[i] !== undefined) spare.set(keys[i]!, prices[i]!);
      retry.push({ job, need: match.need });
    }
    pending = retry;
    if (round === options.lockRounds - 1) contended = retry.length;
  }
  return { won, contended };
}

async function recordFor(
  deps: MatcherDeps,
  tx: Queryable,
  job: ClaimedJob,
  match: PlannedMatch,
  priceMicroUsd: number,
  attempt: number,
  log: Logger,
): Promise<MatchRecord | null> {
  const spec = job.spec as StoredJobSpec;
  const unit: CandidateUnit = match.unit;
  const assignmentId = newId('asg');
  try {
    const inputs = spec.inputs && spec.inputs.length > 0 ? await deps.resolveInputs!(tx, { id: job.id, accountId: job.accountId, assignmentId }, spec.inputs) : [];
    const assignmentSpec = buildAssignmentSpec({ assignmentId, jobId: job.id, spec, maxRuntimeSeconds: job.maxRuntimeSeconds, gpus: match.gpus, inputs });
    return {
      assignmentId,
      jobId: job.id,
      machineId: unit.machine.id,
      attempt,
      gpuIndices: match.gpus.map((g) => g.index),
      classId: unit.classId,
      gpuModel: findGpuClass(unit.classId)?.model ?? unit.classId,
      priceMicroUsd,
      spec: assignmentSpec,
      line: matchedLine({ gpuCount: match.gpus.length, classId: unit.classId, farmName: unit.machine.farmName, regionKey: unit.machine.regionKey, priceMicroUsd, attempt }),
    };
  } catch (err) {
    if (err instanceof JobInputUnavailableError) {
      await cancelForUnavailableInput(tx, job.id, err);
      log.info({ jobId: job.id, assignmentId }, `job ${job.id} canceled: ${err.message}`);
    } else log.warn({ jobId: job.id, assignmentId, machineId: unit.machine.id, err }, `job ${job.id} not matched: its assignment could not be built`);
    return null;
  }
}

/**
 * An input that expired (or left the account) while the job waited can never come back, so the
 * job would wait forever: it is canceled (QUEUED has no way to FAILED) with the refund authorized,
 * and its log and `cancelReason` say what to do.
 */
async function cancelForUnavailableInput(tx: Queryable, jobId: string, err: JobInputUnavailableError): Promise<void> {
  const { from, to } = transitionFor('QUEUED', 'cancel');
  const moved = await applyTransition(tx, { jobId, from, to, cancelReason: err.message });
  if (moved) await appendServiceLine(tx, jobId, `canceled: ${err.message}; the escrow refund is authorized`);
}

export { MatchWriteConflict };
