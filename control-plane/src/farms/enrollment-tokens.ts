import { ApiError, errorForField, findRegion } from '@gpufarm/shared';
import { hashAgentToken, newAgentToken } from '../auth/machine-tokens.js';
import type { Database } from '../db/database.js';
import { audited, recordAudit, type AuditActor } from '../fleet/audit.js';
import { newId } from '../ids.js';
import { findEnrollmentToken, insertEnrollmentToken, revokeEnrollmentToken, upsertFarm, type EnrollmentTokenRow } from './store.js';

/**
 * Enrollment tokens: an operator (or an admin) creates a one-time token (`gfe_…`) for a farm,
 * region and price; `gf-agent enroll` spends it once (`agent-gateway/enrollment.ts`) to register
 * the machine and get its machine token (`gfa_…`). Only SHA-256 hashes of both tokens are stored.
 */

export interface EnrollmentTokenInput {
  /** The farm's slug; the farm is created when missing. */
  farmSlug: string;
  /** The farm's display name (and provider) when it is created; default derived from the slug. */
  farmName?: string | null;
  /**
   * Where the farm is paid (escrow `provider`); stored lowercase; replaces the farm's when given,
   * and a new address removes the operator wallets the old one listed.
   */
  payoutAddress?: string | null;
  regionKey: string;
  /** null: machines enrolled with it are listed nowhere until priced. */
  pricePerGpuHourMicroUsd: number | null;
  label?: string | null;
  ttlSeconds: number;
}

export interface CreatedEnrollmentToken {
  /** Names the token in lists and revocations (`enrt_…`). */
  id: string;
  /** Shown once. */
  token: string;
  farm: { slug: string; name: string };
  regionKey: string;
  pricePerGpuHourMicroUsd: number | null;
  expiresAt: Date;
  /**
   * Set when `payoutAddress` replaced the farm's: the operator wallets the old payout wallet had
   * listed were removed (they run the farm no more until the new payout wallet lists them).
   */
  payoutChange: { from: string; to: string; operatorsRemoved: string[] } | null;
}

/** Default life of an enrollment token: one day. */
export const ENROLLMENT_TOKEN_TTL_SECONDS = 86_400;

function nameFromSlug(slug: string): string {
  return slug.split('-').map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join(' ');
}

/**
 * Creates a one-time enrollment token for a farm (creating the farm when missing).
 * Throws an `invalid_request` error naming the field for an unknown region or a malformed slug or address.
 */
export async function createEnrollmentToken(db: Database, input: EnrollmentTokenInput): Promise<CreatedEnrollmentToken> {
  if (!findRegion(input.regionKey)) throw errorForField('invalid_request', 'regionKey', `unknown region ${input.regionKey}`);
  if (!/^[a-z0-9][a-z0-9-]{1,62}$/.test(input.farmSlug)) {
    throw errorForField('invalid_request', 'farm', 'must be a slug of lowercase letters, digits and -, 2 to 63 characters');
  }
  const payout = input.payoutAddress ? input.payoutAddress.toLowerCase() : null;
  if (payout !== null && !/^0x[0-9a-f]{40}$/.test(payout)) {
    throw errorForField('invalid_request', 'payoutAddress', 'must be a 0x-prefixed 20-byte hex address');
  }
  const token = newAgentToken('gfe');
  const id = newId('enrt');
  const name = input.farmName ?? nameFromSlug(input.farmSlug);
  return db.transaction(async (tx) => {
    const farm = await upsertFarm(tx, { id: newId('farm'), slug: input.farmSlug, name, payoutAddress: payout });
    // A job is settled by releasing its escrow to the farm's address: without one, a machine
    // could run jobs that can never be paid out.
    if (farm.payout_address === null) {
      throw errorForField('invalid_request', 'payoutAddress', `farm ${input.farmSlug} has no payout address yet; give the address its earnings are released to`);
    }
    const expiresAt = await insertEnrollmentToken(tx, { id, tokenHash: hashAgentToken(token), farmId: farm.id, regionKey: input.regionKey, pricePerGpuHourMicroUsd: input.pricePerGpuHourMicroUsd, label: input.label ?? null, ttlSeconds: input.ttlSeconds });
    const payoutChange =
      farm.previous_payout_address !== null && farm.payout_address !== null && farm.previous_payout_address !== farm.payout_address
        ? { from: farm.previous_payout_address, to: farm.payout_address, operatorsRemoved: farm.operators_removed }
        : null;
    return { id, token, farm: { slug: farm.slug, name: farm.name }, regionKey: input.regionKey, pricePerGpuHourMicroUsd: input.pricePerGpuHourMicroUsd, expiresAt, payoutChange };
  });
}

/**
 * A token for one of an operator's farms (the farm exists: no payout address is given), recorded
 * in the audit log with who asked. Returns the token (shown once) and its row.
 */
export async function createFarmEnrollmentToken(
  db: Database,
  input: { farm: { id: string; slug: string }; regionKey: string; pricePerGpuHourMicroUsd: number | null; label: string | null; ttlSeconds: number; actor: AuditActor },
): Promise<{ token: string; row: EnrollmentTokenRow }> {
  const created = await createEnrollmentToken(db, {
    farmSlug: input.farm.slug,
    regionKey: input.regionKey,
    pricePerGpuHourMicroUsd: input.pricePerGpuHourMicroUsd,
    label: input.label,
    ttlSeconds: input.ttlSeconds,
  });
  const row = await findEnrollmentToken(db, [input.farm.id], created.id);
  if (!row) throw new Error(`enrollment token ${created.id} vanished after its creation`);
  await recordAudit(db, {
    actor: input.actor,
    action: 'enrollment_token.create',
    targetType: 'enrollment_token',
    targetId: created.id,
    details: { farm: input.farm.slug, regionKey: input.regionKey, pricePerGpuHourMicroUsd: input.pricePerGpuHourMicroUsd },
  });
  return { token: created.token, row };
}

/** Revokes a token of the farms (audited); 404 `not_found` when it is none of theirs. Returns its row after. */
export async function revokeFarmEnrollmentToken(db: Database, input: { farmIds: readonly string[]; id: string; actor: AuditActor }): Promise<EnrollmentTokenRow> {
  const token = await findEnrollmentToken(db, input.farmIds, input.id);
  if (!token) throw new ApiError('not_found', `No enrollment token ${input.id}.`);
  await audited(db, { actor: input.actor, action: 'enrollment_token.revoke', targetType: 'enrollment_token', targetId: input.id }, (tx) => revokeEnrollmentToken(tx, input.id));
  return (await findEnrollmentToken(db, [token.farmId], input.id))!;
}

/**
 * A token an admin creates (the farm created, or given a payout address, when missing), recorded
 * in the audit log under the farm's slug with what it set.
 */
export async function createAdminEnrollmentToken(db: Database, input: EnrollmentTokenInput & { actor: AuditActor }): Promise<CreatedEnrollmentToken> {
  const { actor, ...token } = input;
  const created = await createEnrollmentToken(db, token);
  await recordAudit(db, {
    actor,
    action: 'enrollment_token.create',
    targetType: 'enrollment_token',
    targetId: created.farm.slug,
    details: {
      farm: created.farm.slug,
      regionKey: created.regionKey,
      pricePerGpuHourMicroUsd: created.pricePerGpuHourMicroUsd,
      label: token.label ?? null,
      expiresAt: created.expiresAt.toISOString(),
      payoutChange: created.payoutChange,
    },
  });
  return created;
}
