import { errorForField, findRegion, type EnrollRequest } from '@gpufarm/shared';
import { recordFleetEvent } from '../fleet/events.js';
import type { Database } from '../db/database.js';
import { newId } from '../ids.js';
import { hashAgentToken, newAgentToken } from '../auth/machine-tokens.js';
import { claimEnrollmentToken, insertEnrolledMachine, insertEnrollmentToken, linkEnrollmentToken, upsertFarm } from './store.js';

/**
 * Enrollment: an operator creates a one-time token (`gfe_…`) for a
 * farm, region and price; `gf-agent enroll` spends it once to register the machine and get its
 * machine token (`gfa_…`). Only SHA-256 hashes of both tokens are stored.
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

export interface EnrolledMachine {
  machineId: string;
  /** Shown once. */
  machineToken: string;
}

/**
 * Spends an enrollment token (one guarded UPDATE: unused and unexpired) and registers the
 * machine: farm, region and price from the token; status `offline` until its link says hello;
 * its GPUs from the inventory (those of a catalog class). Returns null when the token is
 * unknown, used or expired.
 */
export async function enrollMachine(db: Database, request: EnrollRequest): Promise<EnrolledMachine | null> {
  const machineId = newId('mach');
  const machineToken = newAgentToken('gfa');
  return db.transaction(async (tx) => {
    const claimed = await claimEnrollmentToken(tx, hashAgentToken(request.enrollmentToken));
    if (!claimed) return null;
    await insertEnrolledMachine(tx, {
      id: machineId,
      farmId: claimed.farm_id,
      regionKey: claimed.region_key,
      pricePerGpuHourMicroUsd: claimed.price,
      tokenHash: hashAgentToken(machineToken),
      request,
    });
    await linkEnrollmentToken(tx, hashAgentToken(request.enrollmentToken), machineId);
    const gpus = request.inventory.gpus.length;
    await recordFleetEvent(tx, {
      type: 'machine.enrolled',
      machineId,
      farmId: claimed.farm_id,
      message: `enrolled in ${claimed.region_key} with ${gpus} GPU${gpus === 1 ? '' : 's'} (agent ${request.inventory.agentVersion})`,
      details: { regionKey: claimed.region_key, gpus, agentVersion: request.inventory.agentVersion, driverVersion: request.inventory.driverVersion },
    });
    return { machineId, machineToken };
  });
}
