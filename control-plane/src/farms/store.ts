import type { Queryable } from '../db/database.js';

/**
 * The one writer of `farms`, `farm_operators` and `enrollment_tokens`: farms created or given a
 * payout address by an enrollment token, their listed operator wallets, their quarantine, and the
 * tokens' life (created, spent, linked to the machine they enrolled, revoked). What a farm's
 * machines cost is a column of `machines` (`machines/store.ts`).
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

/** Records which machine an enrollment token enrolled. */
export async function linkEnrollmentToken(tx: Queryable, tokenHash: string, machineId: string): Promise<void> {
  await tx.query('UPDATE enrollment_tokens SET machine_id = $2 WHERE token_hash = $1', [tokenHash, machineId]);
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

/** The farm's status, locked for update; null when there is no such farm. */
export async function lockFarmStatus(db: Queryable, farmId: string): Promise<string | null> {
  const [row] = await db.query<{ status: string }>('SELECT status FROM farms WHERE id = $1 FOR UPDATE', [farmId]);
  return row?.status ?? null;
}

export async function writeFarmQuarantine(db: Queryable, farmId: string, quarantine: { quarantined: boolean; reason: string | null }): Promise<void> {
  await db.query(
    `UPDATE farms SET status = $2, quarantine_reason = $3, quarantined_at = CASE WHEN $2 = 'quarantined' THEN coalesce(quarantined_at, now()) END WHERE id = $1`,
    [farmId, quarantine.quarantined ? 'quarantined' : 'active', quarantine.quarantined ? quarantine.reason : null],
  );
}
