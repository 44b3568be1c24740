import { ApiError } from '@gpufarm/shared';
import type { Database } from '../db/database.js';
import { audited, type AuditActor } from '../fleet/audit.js';
import { setClassPrice, setMachinePrice } from '../machines/store.js';

/**
 * A farm's prices: per GPU class (every machine of the farm with a GPU of it) or per machine;
 * null takes the machines off the market until priced. Each change is audited with its actor.
 */

/** Prices the farm's machines with a GPU of the class; returns their ids. */
export function setFarmClassPrice(db: Database, input: { farm: { id: string; slug: string }; classId: string; price: number | null; actor: AuditActor }): Promise<string[]> {
  return audited<string[]>(
    db,
    { actor: input.actor, action: 'price.set_class', targetType: 'price', targetId: `${input.farm.slug}/${input.classId}`, details: (changed) => ({ pricePerGpuHourMicroUsd: input.price, machines: changed }) },
    (tx) => setClassPrice(tx, { farmId: input.farm.id, classId: input.classId, price: input.price }),
  );
}

/** Prices one machine of the farms; 404 `not_found` when it is none of theirs. */
export async function setFarmMachinePrice(db: Database, input: { farmIds: readonly string[]; machineId: string; price: number | null; actor: AuditActor }): Promise<void> {
  await audited(db, { actor: input.actor, action: 'price.set_machine', targetType: 'machine', targetId: input.machineId, details: () => ({ pricePerGpuHourMicroUsd: input.price }) }, async (tx) => {
    if (!(await setMachinePrice(tx, { farmIds: input.farmIds, machineId: input.machineId, price: input.price }))) throw new ApiError('not_found', `No machine ${input.machineId}.`);
  });
}
