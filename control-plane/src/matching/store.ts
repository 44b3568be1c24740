import { GpufarmError } from '@gpufarm/shared';
import type { Queryable } from '../db/database.js';
import { loadUptimeSeconds, uptimeCentiPct, uptimeWindowFirstDay } from '../capacity/store.js';
import { moveMatchedJobs } from '../jobs/store.js';
import { reserveMatchedGpus } from '../machines/gpus-store.js';
import { insertServiceLines } from '../logs/store.js';
import { recordOffers } from '../phases/store.js';
import { AGENT_DISPATCH_CHANNEL, type DispatchNotice } from '../dispatch/notice.js';
import type { MachineImageReport } from './image-holdings.js';
import { TIER_RANK, type CandidateMachine, type CandidateUnit } from './plan.js';

/**
 * The matcher's SQL. Reads are single-table statements joined in memory (as the offer index
 * does: a join's plan over 10,000 machines depends on statistics PGlite never gathers); the
 * writes are one statement per table for a whole batch, their rows sent as arrays or JSON.
 */

/** A claimed QUEUED job (its row stays locked until the batch's transaction ends). */
export interface ClaimedJob {
  id: string;
  seq: number;
  accountId: string;
  spec: unknown;
  gpuCount: number;
  capMicroUsd: number;
  workloadType: string;
  maxRuntimeSeconds: number;
  /** Seconds since the job last entered QUEUED (the queue wait, when it is matched now). */
  queuedSeconds: number;
}

/**
 * Locks up to `limit` QUEUED jobs without a funding hold after position `afterSeq`, in queue
 * order, skipping jobs another matcher holds (`FOR UPDATE SKIP LOCKED`).
 */
export async function claimQueuedJobs(tx: Queryable, params: { afterSeq: number; limit: number }): Promise<ClaimedJob[]> {
  return tx.query<ClaimedJob>(
    `SELECT id, seq, account_id AS "accountId", spec, gpu_count AS "gpuCount", max_price_per_gpu_hour_micro_usd AS "capMicroUsd",
       workload_type AS "workloadType", max_runtime_seconds AS "maxRuntimeSeconds",
       extract(epoch FROM now() - status_changed_at)::float8 AS "queuedSeconds"
     FROM jobs WHERE status = 'QUEUED' AND funding_hold IS NULL AND seq > $1
     ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED`,
    [params.afterSeq, params.limit],
  );
}

/** True when some QUEUED job without a funding hold waits (a cheap check before loading the fleet). */
export async function anyQueuedJob(db: Queryable): Promise<boolean> {
  const rows = await db.query(`SELECT 1 FROM jobs WHERE status = 'QUEUED' AND funding_hold IS NULL LIMIT 1`);
  return rows.length > 0;
}

export interface JobHistory {
  /** Machines excluded for the job. */
  excluded: Map<string, Set<string>>;
  /** Assignments the job had so far. */
  assignments: Map<string, number>;
  /** Jobs that still hold a live (offered, accepted, running) assignment: not matched again. */
  live: Set<string>;
}

/** Exclusions and earlier assignments of the claimed jobs. */
export async function loadJobHistory(tx: Queryable, jobIds: readonly string[]): Promise<JobHistory> {
  // One after the other: a transaction's connection runs one statement at a time.
  const exclusions = await tx.query<{ job_id: string; machine_id: string }>('SELECT job_id, machine_id FROM job_exclusions WHERE job_id = ANY($1::text[])', [jobIds]);
  const counts = await tx.query<{ job_id: string; n: number; live: boolean }>(
    `SELECT job_id, count(*)::int AS n, bool_or(state IN ('offered', 'accepted', 'running')) AS live
     FROM assignments WHERE job_id = ANY($1::text[]) GROUP BY job_id`,
    [jobIds],
  );
  const history: JobHistory = { excluded: new Map(), assignments: new Map(), live: new Set() };
  for (const e of exclusions) {
    let set = history.excluded.get(e.job_id);
    if (!set) history.excluded.set(e.job_id, (set = new Set()));
    set.add(e.machine_id);
  }
  for (const c of counts) {
    history.assignments.set(c.job_id, c.n);
    if (c.live) history.live.add(c.job_id);
  }
  return history;
}

/**
 * Every free GPU (not busy, no assignment, with a UUID, not judged failed) of the machines that can take jobs:
 * online, verified (machine-verification), not draining (by its agent or asked to), not cordoned, priced, on an active farm, with an enrolled agent (a machine token)
 * unless `allowAgentless`, and not simulated unless `allowSimulated`, each with whether it proved its GPUs (`proven_at` on a machine that is
 * not simulated). Read without locks, outside any transaction (the statements run side by side on the pool): the matcher locks what it
 * picked (`lockGpus`).
 */
export async function loadCandidates(db: Queryable, params: { allowAgentless: boolean; allowSimulated: boolean; now: Date }): Promise<CandidateUnit[]> {
  const [farms, machines, gpus, uptime] = await Promise.all([
    db.query<{ id: string; name: string }>(`SELECT id, name FROM farms WHERE status = 'active'`),
    db.query<{ id: string; farm_id: string; region_key: string; price: number; tier: string | null; workloads: string[] | null; created_ms: number; proven: boolean }>(
      `SELECT id, farm_id, region_key, price_per_gpu_hour_micro_usd AS price, benchmark_tier AS tier, workloads,
         (extract(epoch FROM created_at) * 1000)::float8 AS created_ms, (proven_at IS NOT NULL AND NOT simulated) AS proven
       FROM machines
       WHERE status = 'online' AND verification = 'verified' AND NOT draining AND NOT drain_requested AND NOT cordoned
         AND price_per_gpu_hour_micro_usd IS NOT NULL
         AND ($1::boolean OR token_hash IS NOT NULL) AND ($2::boolean OR NOT simulated)`,
      [params.allowAgentless, params.allowSimulated],
    ),
    db.query<{ machine_id: string; gpu_index: number; uuid: string; class_id: string; vram_bytes: number }>(
      `SELECT machine_id, gpu_index, uuid, class_id, vram_bytes FROM machine_gpus
       WHERE NOT busy AND assignment_id IS NULL AND uuid IS NOT NULL AND health <> 'failed' ORDER BY machine_id, class_id, gpu_index`,
    ),
    loadUptimeSeconds(db, uptimeWindowFirstDay(params.now)),
  ]);
  const farmName = new Map(farms.map((f) => [f.id, f.name]));
  const byId = new Map<string, CandidateMachine>();
  for (const m of machines) {
    const name = farmName.get(m.farm_id);
    if (name === undefined) continue;
    byId.set(m.id, {
      id: m.id,
      farmName: name,
      regionKey: m.region_key,
      priceMicroUsd: Number(m.price),
      tierRank: m.tier === null ? 0 : (TIER_RANK[m.tier] ?? 0),
      uptimeCentiPct: uptimeCentiPct(uptime.get(m.id) ?? 0, m.created_ms, params.now),
      workloads: m.workloads === null ? null : new Set(m.workloads),
      proven: m.proven,
    });
  }
  const units: CandidateUnit[] = [];
  let current: CandidateUnit | null = null;
  for (const g of gpus) {
    const machine = byId.get(g.machine_id);
    if (!machine) continue;
    if (current === null || current.machine !== machine || current.classId !== g.class_id) {
      current = { machine, classId: g.class_id, free: [] };
      units.push(current);
    }
    current.free.push({ index: g.gpu_index, uuid: g.uuid, vramBytes: Number(g.vram_bytes) });
  }
  return units;
}

/** A machine's stored image report, named by when it was received (a newer one replaces it whole). */
export interface ReportVersion {
  machineId: string;
  /** `machine_images.reported_at` as text, to the microsecond: the report's version. */
  reportedAt: string;
}

/**
 * The versions of the reports of machines that hold one of `keys` by name, or, with `layers`,
 * of the machines among `machineIds` holding any of those layers: what the matcher compares
 * with the reports it keeps, before reading any report whole (`loadReports`).
 */
export async function loadReportVersions(db: Queryable, params: { keys: readonly string[] } | { layers: readonly string[]; machineIds: readonly string[] }): Promise<ReportVersion[]> {
  if ('keys' in params) {
    if (params.keys.length === 0) return [];
    return db.query<ReportVersion>(`SELECT machine_id AS "machineId", reported_at::text AS "reportedAt" FROM machine_images WHERE image_names && $1::text[]`, [params.keys]);
  }
  if (params.layers.length === 0 || params.machineIds.length === 0) return [];
  return db.query<ReportVersion>(
    `SELECT machine_id AS "machineId", reported_at::text AS "reportedAt" FROM machine_images WHERE layer_digests && $1::text[] AND machine_id = ANY($2::text[])`,
    [params.layers, params.machineIds],
  );
}

/** The stored reports of `machineIds`, with their versions. */
export async function loadReports(db: Queryable, machineIds: readonly string[]): Promise<Array<MachineImageReport & ReportVersion>> {
  if (machineIds.length === 0) return [];
  return db.query<MachineImageReport & ReportVersion>(`SELECT machine_id AS "machineId", reported_at::text AS "reportedAt", report FROM machine_images WHERE machine_id = ANY($1::text[])`, [machineIds]);
}

/** A GPU row the matcher locked, with its machine's price at that moment. */
export interface LockedGpu {
  machineId: string;
  index: number;
  priceMicroUsd: number;
}

/**
 * Locks the wanted GPU rows that are still free on a machine that can still take jobs,
 * skipping rows another matcher holds (`FOR UPDATE SKIP LOCKED`): a row comes back only when
 * this transaction now owns it, so two matchers never reserve one GPU. Proof needs no second
 * look here: a machine loses it only by leaving `verified` (a failed or new GPU challenge),
 * which this statement checks.
 */
export async function lockGpus(
  tx: Queryable,
  params: { machineIds: readonly string[]; indices: readonly number[]; allowAgentless: boolean; allowSimulated: boolean },
): Promise<LockedGpu[]> {
  if (params.machineIds.length === 0) return [];
  return tx.query<LockedGpu>(
    `SELECT g.machine_id AS "machineId", g.gpu_index AS "index", m.price_per_gpu_hour_micro_usd AS "priceMicroUsd"
     FROM unnest($1::text[], $2::int[]) AS w(machine_id, gpu_index)
     JOIN machine_gpus g ON g.machine_id = w.machine_id AND g.gpu_index = w.gpu_index
     JOIN machines m ON m.id = g.machine_id
     JOIN farms f ON f.id = m.farm_id
     WHERE NOT g.busy AND g.assignment_id IS NULL AND g.health <> 'failed'
       AND m.status = 'online' AND m.verification = 'verified' AND NOT m.draining AND NOT m.drain_requested AND NOT m.cordoned
       AND m.price_per_gpu_hour_micro_usd IS NOT NULL
       AND ($3::boolean OR m.token_hash IS NOT NULL) AND ($4::boolean OR NOT m.simulated) AND f.status = 'active'
     FOR UPDATE OF g SKIP LOCKED`,
    [params.machineIds, params.indices, params.allowAgentless, params.allowSimulated],
  );
}

/** One match to write: the assignment, its GPUs and the job's system line. */
export interface MatchRecord {
  assignmentId: string;
  jobId: string;
  machineId: string;
  attempt: number;
  gpuIndices: number[];
  classId: string;
  gpuModel: string;
  priceMicroUsd: number;
  spec: unknown;
  line: string;
}

/** Another writer changed a GPU or a job the batch read: roll the batch back and match again. */
export class MatchWriteConflict extends GpufarmError<'match_write_conflict'> {
  constructor(what: string) {
    super('match_write_conflict', `${what}: another writer changed them; roll the batch back and match on the next pass`, { retryable: true });
  }
}

/**
 * Writes a batch of matches inside the caller's transaction, one statement per table: the
 * GPUs reserved (`busy`, `assignment_id`), the assignments (state `offered`), each job moved
 * `from` → `to` (guarded by `from` and no funding hold) with its assignment and attempts
 * (`jobs/store.ts` moveMatchedJobs) and its system line (`logs/store.ts` insertServiceLines:
 * not once the job's log is capped), then one `agent_dispatch` NOTIFY per assignment (delivered at commit). Throws
 * MatchWriteConflict when a GPU or a job was not in the expected state, so the caller rolls
 * the batch back.
 */
export async function writeMatches(tx: Queryable, matches: readonly MatchRecord[], transition: { from: string; to: string }): Promise<void> {
  if (matches.length === 0) return;
  const gpuMachine: string[] = [];
  const gpuIndex: number[] = [];
  const gpuAssignment: string[] = [];
  for (const m of matches) {
    for (const index of m.gpuIndices) {
      gpuMachine.push(m.machineId);
      gpuIndex.push(index);
      gpuAssignment.push(m.assignmentId);
    }
  }
  const reserved = await reserveMatchedGpus(tx, { machineIds: gpuMachine, gpuIndexes: gpuIndex, assignmentIds: gpuAssignment });
  if (reserved !== gpuIndex.length) throw new MatchWriteConflict(`reserved ${reserved} of ${gpuIndex.length} GPUs`);

  // The class's model as `gpu_classes` names it: a derived class is in no catalog the matcher holds.
  await tx.query(
    `INSERT INTO assignments (id, job_id, machine_id, attempt, state, gpu_indices, class_id, gpu_model, price_per_gpu_hour_micro_usd, spec)
     SELECT x.id, x.job_id, x.machine_id, x.attempt, 'offered', x.gpu_indices, x.class_id, coalesce(c.model, x.gpu_model), x.price, x.spec
     FROM jsonb_to_recordset($1::jsonb) AS x(id text, job_id text, machine_id text, attempt int, gpu_indices int[], class_id text,
       gpu_model text, price bigint, spec jsonb)
     LEFT JOIN gpu_classes c ON c.class_id = x.class_id`,
    [
      JSON.stringify(
        matches.map((m) => ({
          id: m.assignmentId,
          job_id: m.jobId,
          machine_id: m.machineId,
          attempt: m.attempt,
          gpu_indices: m.gpuIndices,
          class_id: m.classId,
          gpu_model: m.gpuModel,
          price: m.priceMicroUsd,
          spec: m.spec,
        })),
      ),
    ],
  );

  // Before the jobs move: their status time is still when they entered QUEUED (the start phases' first boundary).
  await recordOffers(tx, matches.map((m) => m.assignmentId));
  const moved = await moveMatchedJobs(tx, matches, transition);
  if (moved.length !== matches.length) throw new MatchWriteConflict(`moved ${moved.length} of ${matches.length} jobs`);
  const lineOf = new Map(matches.map((m) => [m.jobId, m.line]));
  await insertServiceLines(
    tx,
    moved.flatMap((j) => (j.seq === null ? [] : [{ jobId: j.jobId, seq: j.seq, line: lineOf.get(j.jobId)! }])),
  );

  const notices = matches.map((m) => JSON.stringify({ machineId: m.machineId, assignmentId: m.assignmentId, kind: 'assign' } satisfies DispatchNotice));
  await tx.query(`SELECT count(*) FROM unnest($2::text[]) AS n(payload) CROSS JOIN LATERAL pg_notify($1, n.payload)`, [AGENT_DISPATCH_CHANNEL, notices]);
}

/**
 * Jobs waiting (QUEUED or MATCHING) per GPU class id: each job counts for the classes it was
 * priced against at creation (`matched_classes`), else for its allowlist; a job with neither
 * counts nowhere.
 */
export async function countQueuedByClass(db: Queryable): Promise<Map<string, number>> {
  const rows = await db.query<{ class_id: string; n: number }>(
    `SELECT c AS class_id, count(*)::int AS n
     FROM jobs j CROSS JOIN LATERAL unnest(
       CASE WHEN cardinality(j.matched_classes) > 0 THEN j.matched_classes
            ELSE ARRAY(SELECT jsonb_array_elements_text(j.spec -> 'gpu' -> 'modelAllowlist')) END) AS c
     WHERE j.status IN ('QUEUED', 'MATCHING')
     GROUP BY c`,
  );
  return new Map(rows.map((r) => [r.class_id, r.n]));
}
