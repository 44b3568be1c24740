import type { EnrollRequest } from '@gpufarm/shared';
import type { ExecutionConfig } from '../config.js';
import type { Queryable } from '../db/database.js';
import { inventoryColumns, writeOfferedGpus } from './machine-store.js';

/**
 * The gateway's SQL for enrollment (farms, enrollment tokens, new machines) and for the
 * liveness sweep (`sweeper.ts`); what an agent's link writes about its machine is in
 * `machine-store.ts`.
 */

/**
 * Creates the farm, or gives an existing one the payout address when one is given. A payout
 * address that replaces another removes the farm's listed operator wallets (returned, sorted).
 */
export async function upsertFarm(
  tx: Queryable,
  farm: { id: string; slug: string; name: string; payoutAddress: string | null },
): Promise<{ id: string; slug: string; name: string; payout_address: string | null; previous_payout_address: string | null; operators_removed: string[] }> {
  const [previous] = await tx.query<{ payout_address: string | null }>('SELECT payout_address FROM farms WHERE slug = $1 FOR UPDATE', [farm.slug]);
  const [row] = await tx.query<{ id: string; slug: string; name: string; payout_address: string | null }>(
    `INSERT INTO farms (id, slug, name, provider, payout_address) VALUES ($1, $2, $3, $3, $4)
     ON CONFLICT (slug) DO UPDATE SET payout_address = coalesce(excluded.payout_address, farms.payout_address)
     RETURNING id, slug, name, payout_address`,
    [farm.id, farm.slug, farm.name, farm.payoutAddress],
  );
  const previousPayout = previous?.payout_address ?? null;
  const changed = previousPayout !== null && previousPayout !== row!.payout_address;
  // The listed operator wallets were the old payout wallet's to choose: the new one lists its own.
  const removed = changed
    ? await tx.query<{ wallet_address: string }>('DELETE FROM farm_operators WHERE farm_id = $1 RETURNING wallet_address', [row!.id])
    : [];
  return { ...row!, previous_payout_address: previousPayout, operators_removed: removed.map((r) => r.wallet_address).sort() };
}

/** Stores a new enrollment token (its hash) under `id`; returns when it expires. */
export async function insertEnrollmentToken(
  tx: Queryable,
  token: { id: string; tokenHash: string; farmId: string; regionKey: string; pricePerGpuHourMicroUsd: number | null; label: string | null; ttlSeconds: number },
): Promise<Date> {
  const [row] = await tx.query<{ expires_at: Date }>(
    `INSERT INTO enrollment_tokens (id, token_hash, farm_id, region_key, price_per_gpu_hour_micro_usd, label, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7)) RETURNING expires_at`,
    [token.id, token.tokenHash, token.farmId, token.regionKey, token.pricePerGpuHourMicroUsd, token.label, token.ttlSeconds],
  );
  return row!.expires_at;
}

/** Spends an unused, unrevoked, unexpired enrollment token (one guarded UPDATE); null when there is none. */
export async function claimEnrollmentToken(tx: Queryable, tokenHash: string): Promise<{ farm_id: string; region_key: string; price: number | null } | null> {
  const [claimed] = await tx.query<{ farm_id: string; region_key: string; price: number | null }>(
    `UPDATE enrollment_tokens SET used_at = now()
      WHERE token_hash = $1 AND used_at IS NULL AND revoked_at IS NULL AND expires_at > now()
      RETURNING farm_id, region_key, price_per_gpu_hour_micro_usd AS price`,
    [tokenHash],
  );
  return claimed ?? null;
}

/** Registers an enrolled machine (`offline` until its link says hello) and its GPUs of a catalog class. */
export async function insertEnrolledMachine(
  tx: Queryable,
  machine: { id: string; farmId: string; regionKey: string; pricePerGpuHourMicroUsd: number | null; tokenHash: string; request: EnrollRequest },
): Promise<void> {
  const { request } = machine;
  const columns = inventoryColumns(request.inventory);
  await tx.query(
    `INSERT INTO machines (id, farm_id, region_key, status, price_per_gpu_hour_micro_usd, cuda_version, driver_version,
       cpu_cores, ram_bytes, disk_free_bytes, simulated, token_hash, public_key_pem, agent_version, inventory)
     VALUES ($1, $2, $3, 'offline', $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
    [
      machine.id, machine.farmId, machine.regionKey, machine.pricePerGpuHourMicroUsd, columns.cudaVersion, columns.driverVersion,
      columns.cpuCores, columns.ramBytes, columns.diskFreeBytes, columns.simulated, machine.tokenHash,
      request.publicKeyPem, request.agentVersion, JSON.stringify(request.inventory),
    ],
  );
  await writeOfferedGpus(tx, machine.id, request.inventory);
}

/** Records which machine an enrollment token enrolled. */
export async function linkEnrollmentToken(tx: Queryable, tokenHash: string, machineId: string): Promise<void> {
  await tx.query('UPDATE enrollment_tokens SET machine_id = $2 WHERE token_hash = $1', [tokenHash, machineId]);
}

/** Marks silent machines offline; returns their ids. Seeded machines (no token) never connect and are left alone. */
export async function markSilentMachinesOffline(db: Queryable, config: Pick<ExecutionConfig, 'machineOfflineSeconds'>): Promise<string[]> {
  const rows = await db.query<{ id: string }>(
    `UPDATE machines SET status = 'offline', offline_since = now(), updated_at = now()
      WHERE status IN ('online', 'unhealthy', 'draining') AND token_hash IS NOT NULL
        AND (last_heartbeat_at IS NULL OR last_heartbeat_at < now() - make_interval(secs => $1))
      RETURNING id`,
    [config.machineOfflineSeconds],
  );
  return rows.map((r) => r.id);
}

/** Of these machines, those holding live assignments, with how many. */
export function machinesWithLiveAssignments(db: Queryable, machineIds: readonly string[]): Promise<Array<{ machineId: string; live: number }>> {
  if (machineIds.length === 0) return Promise.resolve([]);
  return db.query<{ machineId: string; live: number }>(
    `SELECT machine_id AS "machineId", count(*)::int AS live FROM assignments
      WHERE machine_id = ANY($1::text[]) AND state IN ('offered', 'accepted', 'running') GROUP BY machine_id`,
    [machineIds],
  );
}

/** Accepted or running assignments whose machine has been offline past the grace period. */
export async function assignmentsPastGrace(db: Queryable, config: Pick<ExecutionConfig, 'machineLostGraceSeconds'>): Promise<Array<{ id: string; machineId: string }>> {
  return db.query<{ id: string; machineId: string }>(
    `SELECT a.id, a.machine_id AS "machineId" FROM assignments a JOIN machines m ON m.id = a.machine_id
      WHERE a.state IN ('accepted', 'running') AND m.status = 'offline'
        AND m.offline_since < now() - make_interval(secs => $1)
      ORDER BY a.offered_at LIMIT 500`,
    [config.machineLostGraceSeconds],
  );
}

/** Offered assignments the agent did not accept in time. */
export async function unansweredOffers(db: Queryable, config: Pick<ExecutionConfig, 'assignTimeoutSeconds'>): Promise<Array<{ id: string; machineId: string }>> {
  return db.query<{ id: string; machineId: string }>(
    `SELECT id, machine_id AS "machineId" FROM assignments
      WHERE state = 'offered' AND offered_at < now() - make_interval(secs => $1)
      ORDER BY offered_at LIMIT 500`,
    [config.assignTimeoutSeconds],
  );
}

/** Where a replica announces a machine's newest link: `{ machineId, epoch }`. */
export const AGENT_LINKS_CHANNEL = 'agent_links';

/**
 * Numbers a machine's new link (larger than any link before it, on any replica) and announces
 * it on `agent_links`, so a replica holding an older link of the machine closes it.
 */
export async function announceAgentLink(db: Queryable, machineId: string): Promise<number> {
  const [row] = await db.query<{ epoch: number }>(
    `SELECT epoch, pg_notify($1, json_build_object('machineId', $2::text, 'epoch', epoch)::text) IS NULL AS sent
       FROM (SELECT nextval('agent_link_epoch') AS epoch) AS next`,
    [AGENT_LINKS_CHANNEL, machineId],
  );
  return Number(row!.epoch);
}

/** Sets the price of the farm's machines with a GPU of the class; returns their ids. */
export async function setClassPrice(db: Queryable, params: { farmId: string; classId: string; price: number | null }): Promise<string[]> {
  const rows = await db.query<{ id: string }>(
    `UPDATE machines m SET price_per_gpu_hour_micro_usd = $3, updated_at = now()
      WHERE m.farm_id = $1 AND m.unenrolled_at IS NULL AND EXISTS (SELECT 1 FROM machine_gpus g WHERE g.machine_id = m.id AND g.class_id = $2)
      RETURNING m.id`,
    [params.farmId, params.classId, params.price],
  );
  return rows.map((r) => r.id);
}

/** Sets one machine's price; false when it is none of the farms'. */
export async function setMachinePrice(db: Queryable, params: { farmIds: readonly string[]; machineId: string; price: number | null }): Promise<boolean> {
  const rows = await db.query(
    `UPDATE machines SET price_per_gpu_hour_micro_usd = $3, updated_at = now() WHERE id = $2 AND farm_id = ANY($1::text[]) RETURNING id`,
    [params.farmIds, params.machineId, params.price],
  );
  return rows.length > 0;
}

/** Unenrolls a machine: disabled (its token opens no link and no HTTP route), so offered nowhere. Returns when it happened. */
export async function unenrollMachine(db: Queryable, machineId: string): Promise<Date> {
  const [row] = await db.query<{ unenrolled_at: Date }>(
    `UPDATE machines SET status = 'disabled', unenrolled_at = coalesce(unenrolled_at, now()), updated_at = now() WHERE id = $1 RETURNING unenrolled_at`,
    [machineId],
  );
  if (!row) throw new Error(`no machine ${machineId}`);
  return row.unenrolled_at;
}
