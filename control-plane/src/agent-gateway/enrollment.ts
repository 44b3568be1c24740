import type { EnrollRequest } from '@gpufarm/shared';
import { hashAgentToken, newAgentToken } from '../auth/machine-tokens.js';
import type { Database } from '../db/database.js';
import { claimEnrollmentToken, linkEnrollmentToken } from '../farms/store.js';
import { recordFleetEvent } from '../fleet/events.js';
import { newId } from '../ids.js';
import { insertEnrolledMachine } from '../machines/store.js';
import { writeOfferedGpus } from './machine-store.js';

/**
 * Enrollment of a machine: `gf-agent enroll` spends a one-time token (`farms/enrollment-tokens.ts`)
 * to register the machine and get its machine token (`gfa_…`).
 */

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
    await writeOfferedGpus(tx, machineId, request.inventory);
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
