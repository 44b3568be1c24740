import type { EarningFacts, EarningGpuHealth, EarningState } from '@gpufarm/shared';
import type { Queryable } from '../db/database.js';

/**
 * The operator area's SQL: a farm's machines with the facts of their earning verdict and its
 * earnings ledger (its tokens, prices and operator wallets are `farms/store.ts`'s). Every query takes the farm ids the session
 * runs, so another farm's rows are never read (they answer as absent, never as forbidden).
 */

export interface MachineFactsRow {
  id: string;
  farmId: string;
  farmSlug: string;
  farmStatus: string;
  regionKey: string;
  status: EarningFacts['status'];
  healthReason: string | null;
  pricePerGpuHourMicroUsd: number | null;
  agentVersion: string | null;
  driverVersion: string | null;
  cudaVersion: string | null;
  benchmarkTier: string | null;
  lastHeartbeatAt: Date | null;
  offlineSince: Date | null;
  unenrolledAt: Date | null;
  draining: boolean;
  drainRequested: boolean;
  drainSetBy: 'admin' | 'operator' | null;
  cordoned: boolean;
  verification: EarningFacts['verification'];
  verificationReason: string | null;
  /** Simulated GPUs are never proven (`provenAt` stays null). */
  simulated: boolean;
  /** The last GPU challenge passed on real GPUs. */
  provenAt: Date | null;
  probeState: string | null;
  probeOutput: string | null;
  /** Offered GPUs, with their class's label and generation (`gpu_classes`: derived classes too). */
  gpus: Array<{ index: number; classId: string; label: string; architecture: string | null; verdict: EarningGpuHealth; reasons: string[] }>;
  /** The GPUs of the agent's last inventory (null before any): a GPU among them but not in `gpus` is not offered. */
  inventoryGpus: Array<{ index: number; name: string; classId: string | null; notOfferedReason?: string | null }> | null;
  currentJobId: string | null;
  currentJobSince: Date | null;
  /** Whether any of its GPUs is reserved (a job of any kind, offered or running, or a hold). */
  gpusBusy: boolean;
}

const MACHINE_FACTS = `
  SELECT m.id, m.farm_id AS "farmId", f.slug AS "farmSlug", f.status AS "farmStatus", m.region_key AS "regionKey",
         m.status, m.health_reason AS "healthReason", m.price_per_gpu_hour_micro_usd::float8 AS "pricePerGpuHourMicroUsd",
         m.agent_version AS "agentVersion", m.driver_version AS "driverVersion", m.cuda_version AS "cudaVersion",
         m.benchmark_tier AS "benchmarkTier", m.last_heartbeat_at AS "lastHeartbeatAt", m.offline_since AS "offlineSince",
         m.unenrolled_at AS "unenrolledAt", m.draining,
         m.drain_requested AS "drainRequested", m.drain_set_by AS "drainSetBy", m.cordoned,
         m.verification, m.verification_reason AS "verificationReason", m.simulated, m.proven_at AS "provenAt",
         m.inventory -> 'health' ->> 'gpuProbe' AS "probeState", m.inventory -> 'health' ->> 'reason' AS "probeOutput",
         coalesce((SELECT json_agg(json_build_object(
                     'index', g.gpu_index, 'classId', g.class_id, 'label', c.label, 'architecture', c.architecture,
                     'verdict', g.health, 'reasons', g.health_reasons) ORDER BY g.gpu_index)
                     FROM machine_gpus g JOIN gpu_classes c ON c.class_id = g.class_id WHERE g.machine_id = m.id), '[]'::json) AS gpus,
         m.inventory -> 'gpus' AS "inventoryGpus",
         cur.job_id AS "currentJobId", cur.since AS "currentJobSince",
         coalesce((SELECT bool_or(b.busy) FROM machine_gpus b WHERE b.machine_id = m.id), false) AS "gpusBusy"
    FROM machines m
    JOIN farms f ON f.id = m.farm_id
    LEFT JOIN LATERAL (
      SELECT a.job_id, coalesce(a.started_at, a.accepted_at) AS since FROM assignments a JOIN jobs j ON j.id = a.job_id
       WHERE a.machine_id = m.id AND a.state IN ('accepted', 'running') AND j.kind = 'customer'
       ORDER BY a.offered_at DESC LIMIT 1
    ) cur ON true`;

/** The farms' machines, by id, after `afterId` when given; `limit` rows at most. */
export function listMachineFacts(db: Queryable, params: { farmIds: readonly string[]; afterId: string | null; limit: number }): Promise<MachineFactsRow[]> {
  return db.query<MachineFactsRow>(
    `${MACHINE_FACTS} WHERE m.farm_id = ANY($1::text[]) AND ($2::text IS NULL OR m.id > $2) ORDER BY m.id LIMIT $3`,
    [params.farmIds, params.afterId, params.limit],
  );
}

/** One machine of the farms; null when it is not one of theirs. */
export async function findMachineFacts(db: Queryable, farmIds: readonly string[], machineId: string): Promise<MachineFactsRow | null> {
  const [row] = await db.query<MachineFactsRow>(`${MACHINE_FACTS} WHERE m.id = $2 AND m.farm_id = ANY($1::text[])`, [farmIds, machineId]);
  return row ?? null;
}

/** The machine's latest customer jobs on it, newest first. */
export function recentMachineJobs(db: Queryable, machineId: string, limit = 20) {
  return db.query<{ jobId: string; status: string; startedAt: Date | null; finishedAt: Date | null; failureCode: string | null }>(
    `SELECT a.job_id AS "jobId", j.status, a.started_at AS "startedAt", a.finished_at AS "finishedAt", a.failure_code AS "failureCode"
       FROM assignments a JOIN jobs j ON j.id = a.job_id
      WHERE a.machine_id = $1 AND j.kind = 'customer' ORDER BY a.offered_at DESC LIMIT $2`,
    [machineId, limit],
  );
}

/** Queued jobs per GPU class they could run on. */
export async function queuedJobsByClass(db: Queryable): Promise<Map<string, number>> {
  const rows = await db.query<{ classId: string; n: number }>(
    `SELECT c AS "classId", count(*)::int AS n FROM jobs, unnest(matched_classes) AS c WHERE status = 'QUEUED' GROUP BY c`,
  );
  return new Map(rows.map((r) => [r.classId, r.n]));
}

/** Which part of the earnings ledger: the farms' settled customer jobs completed in `[from, to)`. */
export interface LedgerScope {
  farmIds: readonly string[];
  from: Date | null;
  to: Date | null;
}

/** The fleet contract's earning state (`EARNING_STATES`). */
export type LedgerState = EarningState;

/**
 * The ledger as a relation ($1 farm ids, $2 from, $3 to): one row per settled customer job that
 * ran (its result's assignment) on one of the farms, in token base units: the farm is paid
 * `amount` = payout - fee (a dispute resolved as a refund leaves a payout of 0, and no fee is
 * taken from nothing). `state`: `pending` (completed, not released), `disputed`, `released`,
 * `refunded` (released with nothing for the farm), `waiting_withdrawal` (released, but the escrow
 * could not send the farm's payout: it waits for the payout wallet's `withdraw(token)`). Completed when it was charged; released when
 * its release was recorded.
 */
const LEDGER = `
  SELECT * FROM (
    SELECT e.*, e.payout - e.fee AS amount,
           CASE e.settlement_status WHEN 'completed' THEN 'pending' WHEN 'disputed' THEN 'disputed'
                ELSE CASE WHEN e.payout - e.fee = 0 THEN 'refunded' WHEN e.waiting_withdrawal THEN 'waiting_withdrawal' ELSE 'released' END END AS state
      FROM (
        SELECT j.id AS job_id, a.machine_id, j.payment_token AS token, j.payment_symbol AS symbol, j.payment_decimals AS decimals,
               coalesce(j.settlement_amount, 0) AS payout, least(coalesce(j.settlement_fee, 0), coalesce(j.settlement_amount, 0)) AS fee,
               j.settlement_status,
               coalesce((SELECT min(b.created_at) FROM billing_entries b WHERE b.job_id = j.id AND b.type = 'charge'), a.finished_at, j.updated_at) AS completed_at,
               j.challenge_ends_at,
               (SELECT min(b.created_at) FROM billing_entries b WHERE b.job_id = j.id AND b.type = 'release') AS released_at,
               j.release_tx_hash,
               EXISTS (SELECT 1 FROM escrow_deferred_payments d WHERE d.job_id = j.id AND d.party = 'provider' AND d.withdraw_tx_hash IS NULL) AS waiting_withdrawal
          FROM jobs j JOIN assignments a ON a.id = j.assignment_id JOIN machines m ON m.id = a.machine_id
         WHERE m.farm_id = ANY($1::text[]) AND j.kind = 'customer' AND j.settlement_status IS NOT NULL
      ) e
  ) l
  WHERE ($2::timestamptz IS NULL OR l.completed_at >= $2) AND ($3::timestamptz IS NULL OR l.completed_at < $3)`;

/** A job of the ledger; amounts as decimal strings of token base units. */
export interface LedgerJobRow {
  jobId: string;
  machineId: string;
  token: string;
  symbol: string;
  decimals: number;
  amount: string;
  fee: string;
  state: LedgerState;
  completedAt: Date;
  challengeEndsAt: Date | null;
  releasedAt: Date | null;
  releaseTxHash: string | null;
  /** Where the page after this row starts: its completion (epoch seconds to the microsecond, as text) and job id. */
  cursor: { at: string; id: string };
}

/** A page of the ledger's jobs, newest first by (completion, job id): `limit` after `after` when given. */
const LEDGER_JOB_COLUMNS = `l.job_id AS "jobId", l.machine_id AS "machineId", l.token, l.symbol, l.decimals, l.amount::text AS amount, l.fee::text AS fee, l.state,
            l.completed_at AS "completedAt", l.challenge_ends_at AS "challengeEndsAt", l.released_at AS "releasedAt", l.release_tx_hash AS "releaseTxHash",
            extract(epoch FROM l.completed_at)::text AS at`;

export async function ledgerJobs(db: Queryable, scope: LedgerScope, page: { after: { at: string; id: string } | null; limit: number }): Promise<LedgerJobRow[]> {
  const rows = await db.query<Omit<LedgerJobRow, 'cursor'> & { at: string }>(
    `SELECT ${LEDGER_JOB_COLUMNS}
       FROM (${LEDGER}) l
      WHERE $4::numeric IS NULL OR (extract(epoch FROM l.completed_at), l.job_id) < ($4::numeric, $5::text)
      ORDER BY l.completed_at DESC, l.job_id DESC LIMIT $6`,
    [scope.farmIds, scope.from, scope.to, page.after?.at ?? null, page.after?.id ?? null, page.limit],
  );
  return rows.map(({ at, ...row }) => ({ ...row, cursor: { at, id: row.jobId } }));
}

/** One job's row of the farms' ledger; null when the job was not settled on one of them. */
export async function ledgerJob(db: Queryable, farmIds: readonly string[], jobId: string): Promise<LedgerJobRow | null> {
  const [row] = await db.query<Omit<LedgerJobRow, 'cursor'> & { at: string }>(`SELECT ${LEDGER_JOB_COLUMNS} FROM (${LEDGER}) l WHERE l.job_id = $4`, [farmIds, null, null, jobId]);
  if (!row) return null;
  const { at, ...rest } = row;
  return { ...rest, cursor: { at, id: rest.jobId } };
}

/** A customer job's runs on the farms' machines (every attempt there), oldest first, with the job's own record. */
export async function operatorJobRuns(db: Queryable, farmIds: readonly string[], jobId: string) {
  return db.query<{
    status: string;
    verificationLevel: string | null;
    resultHash: string | null;
    completionTxHash: string | null;
    billableGpuSeconds: number | null;
    resultAssignmentId: string | null;
    assignmentId: string;
    attempt: number;
    machineId: string;
    gpuModel: string;
    gpuCount: number;
    price: number;
    startedAt: Date | null;
    finishedAt: Date | null;
    exitCode: number | null;
    failureCode: string | null;
    failureMessage: string | null;
  }>(
    `SELECT j.status, j.verification_level AS "verificationLevel", j.result_hash AS "resultHash", j.completion_tx_hash AS "completionTxHash",
            j.billable_gpu_seconds AS "billableGpuSeconds", j.assignment_id AS "resultAssignmentId",
            a.id AS "assignmentId", a.attempt, a.machine_id AS "machineId", a.gpu_model AS "gpuModel", cardinality(a.gpu_indices) AS "gpuCount",
            a.price_per_gpu_hour_micro_usd AS price, a.started_at AS "startedAt", a.finished_at AS "finishedAt", a.exit_code AS "exitCode",
            a.failure_code AS "failureCode", a.failure_message AS "failureMessage"
       FROM jobs j JOIN assignments a ON a.job_id = j.id JOIN machines m ON m.id = a.machine_id
      WHERE j.id = $2 AND j.kind = 'customer' AND m.farm_id = ANY($1::text[])
      ORDER BY a.attempt`,
    [farmIds, jobId],
  );
}

/** The ledger summed per (machine | UTC day of completion, token, state); `key` is the machine id or the day. */
export interface LedgerGroupRow {
  key: string;
  token: string;
  symbol: string;
  decimals: number;
  state: LedgerState;
  amount: string;
  fee: string;
  /** The latest completion and release of the jobs in the group. */
  completedAt: Date;
  releasedAt: Date | null;
}

/** A page of the ledger's sums, by (key, token, state) descending: `limit` after `after` when given. */
export function ledgerGroups(
  db: Queryable,
  scope: LedgerScope,
  page: { groupBy: 'machine' | 'day'; after: { key: string; token: string; state: string } | null; limit: number },
): Promise<LedgerGroupRow[]> {
  const key = page.groupBy === 'machine' ? 'l.machine_id' : `to_char(l.completed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')`;
  return db.query<LedgerGroupRow>(
    `SELECT * FROM (
       SELECT ${key} AS key, l.token, min(l.symbol) AS symbol, min(l.decimals) AS decimals, l.state,
              sum(l.amount)::text AS amount, sum(l.fee)::text AS fee, max(l.completed_at) AS "completedAt", max(l.released_at) AS "releasedAt"
         FROM (${LEDGER}) l GROUP BY 1, l.token, l.state
     ) g
     WHERE $4::text IS NULL OR (g.key, g.token, g.state) < ($4::text, $5::text, $6::text)
     ORDER BY g.key DESC, g.token DESC, g.state DESC LIMIT $7`,
    [scope.farmIds, scope.from, scope.to, page.after?.key ?? null, page.after?.token ?? null, page.after?.state ?? null, page.limit],
  );
}

/**
 * Per token, by symbol: what waits in (or past) the challenge window, what was released to the payout
 * address, and what was released but waits in the escrow for the payout wallet's withdrawal.
 */
export function ledgerTotals(db: Queryable, scope: LedgerScope): Promise<Array<{ token: string; symbol: string; decimals: number; pending: string; released: string; waitingWithdrawal: string }>> {
  return db.query(
    `SELECT l.token, min(l.symbol) AS symbol, min(l.decimals) AS decimals,
            coalesce(sum(l.amount) FILTER (WHERE l.state = 'pending'), 0)::text AS pending,
            coalesce(sum(l.amount) FILTER (WHERE l.state = 'released'), 0)::text AS released,
            coalesce(sum(l.amount) FILTER (WHERE l.state = 'waiting_withdrawal'), 0)::text AS "waitingWithdrawal"
       FROM (${LEDGER}) l GROUP BY l.token ORDER BY min(l.symbol), l.token`,
    [scope.farmIds, scope.from, scope.to],
  );
}
