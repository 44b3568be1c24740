import type { EarningFacts, EarningGpuHealth } from '@gpufarm/shared';
import type { Queryable } from '../db/database.js';

/**
 * The operator area's SQL: a farm's machines with the facts of their earning verdict, its
 * enrollment tokens, prices and operator wallets. Every query takes the farm ids the session
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
  cordoned: boolean;
  verification: EarningFacts['verification'];
  verificationReason: string | null;
  probeState: string | null;
  probeOutput: string | null;
  /** Offered GPUs, with their class's label and generation (`gpu_classes`: derived classes too). */
  gpus: Array<{ index: number; classId: string; label: string; architecture: string | null; verdict: EarningGpuHealth; reasons: string[] }>;
  /** The GPUs of the agent's last inventory (null before any): a GPU among them but not in `gpus` is not offered. */
  inventoryGpus: Array<{ index: number; name: string; classId: string | null; notOfferedReason?: string | null }> | null;
  currentJobId: string | null;
  currentJobSince: Date | null;
}

const MACHINE_FACTS = `
  SELECT m.id, m.farm_id AS "farmId", f.slug AS "farmSlug", f.status AS "farmStatus", m.region_key AS "regionKey",
         m.status, m.health_reason AS "healthReason", m.price_per_gpu_hour_micro_usd::float8 AS "pricePerGpuHourMicroUsd",
         m.agent_version AS "agentVersion", m.driver_version AS "driverVersion", m.cuda_version AS "cudaVersion",
         m.benchmark_tier AS "benchmarkTier", m.last_heartbeat_at AS "lastHeartbeatAt", m.offline_since AS "offlineSince",
         m.unenrolled_at AS "unenrolledAt", m.draining,
         m.drain_requested AS "drainRequested", m.cordoned,
         m.verification, m.verification_reason AS "verificationReason",
         m.inventory -> 'health' ->> 'gpuProbe' AS "probeState", m.inventory -> 'health' ->> 'reason' AS "probeOutput",
         coalesce((SELECT json_agg(json_build_object(
                     'index', g.gpu_index, 'classId', g.class_id, 'label', c.label, 'architecture', c.architecture,
                     'verdict', g.health, 'reasons', g.health_reasons) ORDER BY g.gpu_index)
                     FROM machine_gpus g JOIN gpu_classes c ON c.class_id = g.class_id WHERE g.machine_id = m.id), '[]'::json) AS gpus,
         m.inventory -> 'gpus' AS "inventoryGpus",
         cur.job_id AS "currentJobId", cur.since AS "currentJobSince"
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

/** The farms' priced machines' lowest price per GPU class. */
export async function farmPricesByClass(db: Queryable, farmIds: readonly string[]): Promise<Array<{ classId: string; minPrice: number | null }>> {
  return db.query<{ classId: string; minPrice: number | null }>(
    `SELECT g.class_id AS "classId", min(m.price_per_gpu_hour_micro_usd)::float8 AS "minPrice"
       FROM machine_gpus g JOIN machines m ON m.id = g.machine_id
      WHERE m.farm_id = ANY($1::text[]) AND m.unenrolled_at IS NULL GROUP BY g.class_id ORDER BY g.class_id`,
    [farmIds],
  );
}

export interface EnrollmentTokenRow {
  id: string;
  farmSlug: string;
  regionKey: string;
  pricePerGpuHourMicroUsd: number | null;
  label: string | null;
  createdAt: Date;
  expiresAt: Date;
  usedAt: Date | null;
  machineId: string | null;
  revokedAt: Date | null;
}

const TOKEN_COLUMNS = `t.id, f.slug AS "farmSlug", t.region_key AS "regionKey", t.price_per_gpu_hour_micro_usd::float8 AS "pricePerGpuHourMicroUsd",
  t.label, t.created_at AS "createdAt", t.expires_at AS "expiresAt", t.used_at AS "usedAt", t.machine_id AS "machineId", t.revoked_at AS "revokedAt"`;

/** The farms' enrollment tokens, newest first, before `beforeId` when given. */
export function listEnrollmentTokens(db: Queryable, params: { farmIds: readonly string[]; beforeId: string | null; limit: number }): Promise<EnrollmentTokenRow[]> {
  return db.query<EnrollmentTokenRow>(
    `SELECT ${TOKEN_COLUMNS} FROM enrollment_tokens t JOIN farms f ON f.id = t.farm_id
      WHERE t.farm_id = ANY($1::text[]) AND ($2::text IS NULL OR t.id < $2) ORDER BY t.id DESC LIMIT $3`,
    [params.farmIds, params.beforeId, params.limit],
  );
}

export async function findEnrollmentToken(db: Queryable, farmIds: readonly string[], id: string): Promise<(EnrollmentTokenRow & { farmId: string }) | null> {
  const [row] = await db.query<EnrollmentTokenRow & { farmId: string }>(
    `SELECT ${TOKEN_COLUMNS}, t.farm_id AS "farmId" FROM enrollment_tokens t JOIN farms f ON f.id = t.farm_id WHERE t.id = $2 AND t.farm_id = ANY($1::text[])`,
    [farmIds, id],
  );
  return row ?? null;
}

/** Revokes an unused token (a used one enrolled its machine already); keeps the first revocation time. */
export async function revokeEnrollmentToken(db: Queryable, id: string): Promise<void> {
  await db.query('UPDATE enrollment_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1', [id]);
}

/** Lists a wallet as an operator of the farm; false when it was listed already. */
export async function addFarmOperator(db: Queryable, farmId: string, wallet: string): Promise<boolean> {
  const rows = await db.query('INSERT INTO farm_operators (farm_id, wallet_address) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING farm_id', [farmId, wallet]);
  return rows.length > 0;
}

export async function removeFarmOperator(db: Queryable, farmId: string, wallet: string): Promise<boolean> {
  const rows = await db.query('DELETE FROM farm_operators WHERE farm_id = $1 AND wallet_address = $2 RETURNING farm_id', [farmId, wallet]);
  return rows.length > 0;
}

export async function listFarmOperators(db: Queryable, farmId: string): Promise<Array<{ wallet: string; addedAt: Date }>> {
  return db.query<{ wallet: string; addedAt: Date }>('SELECT wallet_address AS wallet, added_at AS "addedAt" FROM farm_operators WHERE farm_id = $1 ORDER BY added_at', [farmId]);
}

/** What the control plane recorded of a farm's settled job: the escrow's amounts in token units and the dates. */
export interface LedgerRow {
  jobId: string;
  machineId: string;
  token: string;
  symbol: string;
  decimals: number;
  payout: string | null;
  fee: string | null;
  feeMicroUsd: string | null;
  paymentKind: 'eth' | 'stable';
  weiPerUsd: string | null;
  settlementStatus: 'completed' | 'disputed' | 'released';
  completedAt: Date;
  challengeEndsAt: Date | null;
  releasedAt: Date | null;
  releaseTxHash: string | null;
}

/** The farms' settled customer jobs completed in `[from, to)`, newest first (the earnings ledger's rows). */
export function ledgerRows(db: Queryable, params: { farmIds: readonly string[]; from: Date | null; to: Date | null }): Promise<LedgerRow[]> {
  return db.query<LedgerRow>(
    `SELECT * FROM (
       SELECT j.id AS "jobId", a.machine_id AS "machineId", j.payment_token AS token, j.payment_symbol AS symbol, j.payment_decimals AS decimals,
              j.settlement_amount::text AS payout, j.settlement_fee::text AS fee, j.fee_micro_usd::text AS "feeMicroUsd",
              j.payment_kind AS "paymentKind", j.wei_per_usd::text AS "weiPerUsd", j.settlement_status AS "settlementStatus",
              coalesce((SELECT min(b.created_at) FROM billing_entries b WHERE b.job_id = j.id AND b.type = 'charge'), a.finished_at, j.updated_at) AS "completedAt",
              j.challenge_ends_at AS "challengeEndsAt",
              (SELECT min(b.created_at) FROM billing_entries b WHERE b.job_id = j.id AND b.type = 'release') AS "releasedAt",
              j.release_tx_hash AS "releaseTxHash"
         FROM jobs j JOIN assignments a ON a.id = j.assignment_id JOIN machines m ON m.id = a.machine_id
        WHERE m.farm_id = ANY($1::text[]) AND j.kind = 'customer' AND j.settlement_status IS NOT NULL
     ) e
     WHERE ($2::timestamptz IS NULL OR e."completedAt" >= $2) AND ($3::timestamptz IS NULL OR e."completedAt" < $3)
     ORDER BY e."completedAt" DESC, e."jobId" DESC`,
    [params.farmIds, params.from, params.to],
  );
}
