import type { MachineState } from '@gpufarm/shared';
import type { Queryable } from '../db/database.js';
import { MACHINE_GPU_FACTS, MACHINE_STATE_SQL, MACHINE_VERDICT_SQL } from '../machines/state-store.js';

/**
 * The admin area's reads: farms, disputes, accounts, the machines table and a machine's page.
 * The machines table is one statement over `machines` with its GPUs and failures folded in
 * per machine (10,000 rows: filters and sorts in SQL, the page and the total from one scan).
 */

export interface AdminFarmRow {
  id: string;
  slug: string;
  name: string;
  status: string;
  quarantine_reason: string | null;
  machines: number;
  payout_address: string | null;
}

export function listAdminFarms(db: Queryable): Promise<AdminFarmRow[]> {
  return db.query<AdminFarmRow>(
    `SELECT f.id, f.slug, f.name, f.status, f.quarantine_reason, f.payout_address,
            (SELECT count(*)::int FROM machines m WHERE m.farm_id = f.id) AS machines
       FROM farms f ORDER BY f.slug`,
  );
}

export interface DisputeRow {
  job_id: string;
  job_key: string;
  customer: string;
  provider: string | null;
  token: string;
  symbol: string;
  decimals: number;
  amount: string;
  payout: string | null;
  disputed_at: Date | null;
  dispute_ends_at: Date | null;
  dispute_reason: string | null;
  dispute_evidence: string | null;
}

/** Jobs in dispute (the escrow event scan saw the customer's `dispute`), oldest first. */
export function listDisputes(db: Queryable): Promise<DisputeRow[]> {
  return db.query<DisputeRow>(
    `SELECT j.id AS job_id, j.escrow_job_key AS job_key, a.wallet_address AS customer,
            (SELECT f.payout_address FROM assignments s JOIN machines m ON m.id = s.machine_id JOIN farms f ON f.id = m.farm_id
              WHERE s.job_id = j.id AND s.state = 'finished' ORDER BY s.finished_at DESC LIMIT 1) AS provider,
            j.payment_token AS token, j.payment_symbol AS symbol, j.payment_decimals AS decimals,
            j.max_payment::text AS amount, j.settlement_amount::text AS payout, j.disputed_at, j.dispute_ends_at,
            j.dispute_reason, j.dispute_evidence
       FROM jobs j JOIN accounts a ON a.id = j.account_id
      WHERE j.settlement_status = 'disputed'
      ORDER BY j.disputed_at NULLS FIRST, j.id`,
  );
}

export interface AdminAccountRow {
  id: string;
  wallet_address: string;
  status: 'active' | 'suspended';
  created_at: Date;
  keys: Array<{ id: string; environment: string; last_four: string; label: string | null; revoked_at: string | null }>;
}

/** Accounts (of one wallet when given), newest first, with their keys; at most `limit`. */
export function listAdminAccounts(db: Queryable, params: { wallet: string | null; limit: number }): Promise<AdminAccountRow[]> {
  return db.query<AdminAccountRow>(
    `SELECT a.id, a.wallet_address, a.status, a.created_at,
            coalesce((SELECT jsonb_agg(jsonb_build_object('id', k.id, 'environment', k.environment, 'last_four', k.last_four, 'label', k.label, 'revoked_at', k.revoked_at)
                        ORDER BY k.created_at DESC) FROM api_keys k WHERE k.account_id = a.id), '[]'::jsonb) AS keys
       FROM accounts a
      WHERE ($1::text IS NULL OR a.wallet_address = $1)
      ORDER BY a.created_at DESC, a.id DESC LIMIT $2`,
    [params.wallet, params.limit],
  );
}

/** The fleet contract's machine state (`MACHINE_STATES`), derived in SQL by `MACHINE_ROWS`. */
export type AdminMachineState = MachineState;
export type AdminMachineSort = 'heartbeat_age' | 'utilization' | 'failures';

export interface AdminMachineFilter {
  farmSlug?: string;
  regionKey?: string;
  classId?: string;
  verdict?: 'healthy' | 'warning' | 'failed';
  agentVersion?: string;
  driverVersion?: string;
  state?: AdminMachineState;
  /** Part of the machine id, the farm slug, or a GPU uuid. */
  q?: string;
}

export interface AdminMachineDbRow {
  id: string;
  farm_id: string;
  farm_slug: string;
  region_key: string;
  state: AdminMachineState;
  verdict: 'healthy' | 'warning' | 'failed';
  health_reason: string | null;
  /** The GPUs judged warning or failed, with their reasons; null when all are healthy. */
  troubled_gpus: unknown;
  gpu_count: number;
  class_ids: string[];
  agent_version: string | null;
  driver_version: string | null;
  cuda_version: string | null;
  benchmark_tier: string | null;
  price: number | null;
  last_heartbeat_at: Date | null;
  heartbeat_age_seconds: number | null;
  utilization_percent: number | null;
  failures_7d: number;
  cordoned: boolean;
  drain_requested: boolean;
  drain_deadline: Date | null;
  total: number;
}

// The machines table: state and verdict by the shared rules (`machines/state-store.ts`), so the
// table's filters, sorts and the overview's counts agree with every view of one machine.
const MACHINE_ROWS = `
  WITH g AS (${MACHINE_GPU_FACTS}
  ), fails AS (
    SELECT machine_id, count(*)::int AS n FROM assignments
     WHERE state IN ('failed', 'lost') AND finished_at > now() - interval '7 days' GROUP BY machine_id
  ), rows AS (
    SELECT m.id, m.farm_id, f.slug AS farm_slug, m.region_key,
      ${MACHINE_STATE_SQL} AS state,
      ${MACHINE_VERDICT_SQL} AS verdict,
      m.health_reason, coalesce(g.gpu_count, 0) AS gpu_count,
      m.agent_version, m.driver_version, m.cuda_version, m.benchmark_tier, m.price_per_gpu_hour_micro_usd AS price,
      m.last_heartbeat_at, extract(epoch FROM now() - m.last_heartbeat_at)::float8 AS heartbeat_age_seconds,
      m.gpu_utilization_percent::float8 AS utilization_percent,
      coalesce(fails.n, 0) AS failures_7d, m.cordoned, m.drain_requested, m.drain_deadline, m.gpu_live
    FROM machines m JOIN farms f ON f.id = m.farm_id
      LEFT JOIN g ON g.machine_id = m.id LEFT JOIN fails ON fails.machine_id = m.id
  )`;

// What a shown row adds to MACHINE_ROWS, read for the rows of a page only: its GPU classes and
// the GPUs judged warning or failed with their reasons.
const MACHINE_GPU_DETAILS = `
  LEFT JOIN LATERAL (
    SELECT coalesce(array_agg(DISTINCT x.class_id ORDER BY x.class_id), ARRAY[]::text[]) AS class_ids,
           jsonb_agg(jsonb_build_object('index', x.gpu_index, 'verdict', x.health, 'reasons', x.health_reasons) ORDER BY x.gpu_index)
             FILTER (WHERE x.health <> 'healthy') AS troubled_gpus
      FROM machine_gpus x WHERE x.machine_id = page.id
  ) details ON true`;

const SORT_COLUMN: Readonly<Record<AdminMachineSort, string>> = {
  heartbeat_age: 'heartbeat_age_seconds',
  utilization: 'utilization_percent',
  failures: 'failures_7d',
};

/** A page of the machines table and the number of machines the filter matches. */
export async function listAdminMachines(
  db: Queryable,
  params: { filter: AdminMachineFilter; sort: AdminMachineSort; order: 'asc' | 'desc'; limit: number; offset: number },
): Promise<{ rows: AdminMachineDbRow[]; total: number }> {
  const f = params.filter;
  const column = SORT_COLUMN[params.sort];
  const direction = params.order === 'asc' ? 'ASC' : 'DESC';
  // Machines never heard from sort as the oldest heartbeat; unknown utilization as the lowest.
  const nulls = params.sort === 'heartbeat_age' ? (params.order === 'desc' ? 'NULLS FIRST' : 'NULLS LAST') : params.order === 'desc' ? 'NULLS LAST' : 'NULLS FIRST';
  const order = `ORDER BY ${column} ${direction} ${nulls}, id ${direction}`;
  const rows = await db.query<AdminMachineDbRow>(
    `${MACHINE_ROWS}
     SELECT page.*, details.class_ids, details.troubled_gpus FROM (
       SELECT id, farm_id, farm_slug, region_key, state, verdict, health_reason, gpu_count, agent_version, driver_version,
              cuda_version, benchmark_tier, price, last_heartbeat_at, heartbeat_age_seconds, utilization_percent, failures_7d,
              cordoned, drain_requested, drain_deadline, count(*) OVER ()::int AS total
         FROM rows
        WHERE ($1::text IS NULL OR farm_slug = $1) AND ($2::text IS NULL OR region_key = $2)
          AND ($3::text IS NULL OR EXISTS (SELECT 1 FROM machine_gpus c WHERE c.machine_id = rows.id AND c.class_id = $3))
          AND ($4::text IS NULL OR verdict = $4)
          AND ($5::text IS NULL OR agent_version = $5) AND ($6::text IS NULL OR driver_version = $6)
          AND ($7::text IS NULL OR state = $7)
          AND ($8::text IS NULL OR id ILIKE '%' || $8 || '%' OR farm_slug ILIKE '%' || $8 || '%' OR gpu_live::text ILIKE '%' || $8 || '%')
        ${order}
        LIMIT $9 OFFSET $10
     ) page ${MACHINE_GPU_DETAILS}
     ${order}`,
    [f.farmSlug ?? null, f.regionKey ?? null, f.classId ?? null, f.verdict ?? null, f.agentVersion ?? null, f.driverVersion ?? null, f.state ?? null, f.q ?? null, params.limit, params.offset],
  );
  let total = rows[0]?.total ?? 0;
  if (rows.length === 0 && params.offset > 0) {
    const [counted] = await listAdminMachines(db, { ...params, offset: 0, limit: 1 }).then((r) => [r.total]);
    total = counted ?? 0;
  }
  return { rows, total };
}

/** One machine's row of the table, or null. */
export async function findAdminMachine(db: Queryable, machineId: string): Promise<AdminMachineDbRow | null> {
  const [row] = await db.query<AdminMachineDbRow>(
    `${MACHINE_ROWS} SELECT page.*, details.class_ids, details.troubled_gpus, 1 AS total FROM (SELECT * FROM rows WHERE id = $1) page ${MACHINE_GPU_DETAILS}`,
    [machineId],
  );
  return row ?? null;
}

/** Machines per state, for the overview (the same state rule as the table). */
export async function countMachinesByState(db: Queryable): Promise<Record<AdminMachineState, number>> {
  const rows = await db.query<{ state: AdminMachineState; n: number }>(`${MACHINE_ROWS} SELECT state, count(*)::int AS n FROM rows GROUP BY state`);
  const counts: Record<AdminMachineState, number> = { online: 0, busy: 0, draining: 0, drained: 0, offline: 0, failed: 0, cordoned: 0 };
  for (const r of rows) counts[r.state] = r.n;
  return counts;
}

export interface RecentJobRow {
  job_id: string;
  status: string;
  started_at: Date | null;
  finished_at: Date | null;
  failure_code: string | null;
}

/** The machine's latest assignments with their jobs' status, newest first. */
export function listRecentMachineJobs(db: Queryable, machineId: string, limit: number): Promise<RecentJobRow[]> {
  return db.query<RecentJobRow>(
    `SELECT a.job_id, j.status, a.started_at, a.finished_at, a.failure_code
       FROM assignments a JOIN jobs j ON j.id = a.job_id
      WHERE a.machine_id = $1 ORDER BY a.offered_at DESC, a.id DESC LIMIT $2`,
    [machineId, limit],
  );
}

/** GPUs of machines not offline, free and busy per (class, region). */
export function countGpusByClassRegion(db: Queryable): Promise<Array<{ class_id: string; region_key: string; free: number; busy: number }>> {
  return db.query(
    `SELECT g.class_id, m.region_key, (count(*) FILTER (WHERE NOT g.busy))::int AS free, (count(*) FILTER (WHERE g.busy))::int AS busy
       FROM machine_gpus g JOIN machines m ON m.id = g.machine_id
      WHERE m.status NOT IN ('offline', 'disabled')
      GROUP BY 1, 2 ORDER BY 1, 2`,
  );
}

export async function countJobsNow(db: Queryable): Promise<{ queued: number; running: number }> {
  const [row] = await db.query<{ queued: number; running: number }>(
    `SELECT (count(*) FILTER (WHERE status IN ('QUEUED', 'MATCHING')))::int AS queued, (count(*) FILTER (WHERE status = 'RUNNING'))::int AS running
       FROM jobs WHERE status IN ('QUEUED', 'MATCHING', 'RUNNING')`,
  );
  return row ?? { queued: 0, running: 0 };
}

/** Seconds from a job's creation to its first offer, over jobs first offered since `since`: p50 and p95. */
export async function queueWaitPercentiles(db: Queryable, since: Date): Promise<{ p50: number | null; p95: number | null }> {
  const [row] = await db.query<{ p50: number | null; p95: number | null }>(
    `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY w) AS p50, percentile_cont(0.95) WITHIN GROUP (ORDER BY w) AS p95
       FROM (SELECT extract(epoch FROM a.offered_at - j.created_at)::float8 AS w
               FROM assignments a JOIN jobs j ON j.id = a.job_id
              WHERE a.attempt = 1 AND a.offered_at >= $1 AND j.kind = 'customer') x`,
    [since],
  );
  return row ?? { p50: null, p95: null };
}

/** Jobs that ended since `since`, per farm of the machine that ran them last. */
export function outcomesByFarm(db: Queryable, since: Date): Promise<Array<{ farm_id: string; farm_slug: string; completed: number; failed: number; timed_out: number; canceled: number }>> {
  return db.query(
    `SELECT f.id AS farm_id, f.slug AS farm_slug,
            (count(*) FILTER (WHERE j.status = 'COMPLETED'))::int AS completed, (count(*) FILTER (WHERE j.status = 'FAILED'))::int AS failed,
            (count(*) FILTER (WHERE j.status = 'TIMED_OUT'))::int AS timed_out, (count(*) FILTER (WHERE j.status = 'CANCELED'))::int AS canceled
       FROM jobs j
       JOIN LATERAL (SELECT machine_id FROM assignments a WHERE a.job_id = j.id ORDER BY a.attempt DESC, a.offered_at DESC LIMIT 1) last ON true
       JOIN machines m ON m.id = last.machine_id JOIN farms f ON f.id = m.farm_id
      WHERE j.status IN ('COMPLETED', 'FAILED', 'TIMED_OUT', 'CANCELED') AND j.updated_at >= $1 AND j.kind = 'customer'
      GROUP BY f.id, f.slug ORDER BY f.slug`,
    [since],
  );
}

/** Who a job is about, for the admin's job page: the customer's wallet, the machine of its assignment, the dispute's words. */
export async function findAdminJobPeople(db: Queryable, jobId: string): Promise<{ wallet_address: string; machine_id: string | null; dispute_reason: string | null; dispute_evidence: string | null } | null> {
  const [row] = await db.query<{ wallet_address: string; machine_id: string | null; dispute_reason: string | null; dispute_evidence: string | null }>(
    `SELECT a.wallet_address, asg.machine_id, j.dispute_reason, j.dispute_evidence
       FROM jobs j JOIN accounts a ON a.id = j.account_id LEFT JOIN assignments asg ON asg.id = j.assignment_id
      WHERE j.id = $1`,
    [jobId],
  );
  return row ?? null;
}
