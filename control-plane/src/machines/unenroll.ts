import type { Database } from '../db/database.js';
import { recordAudit } from '../fleet/audit.js';
import { recordFleetEvent } from '../fleet/events.js';
import { unenrollMachine } from './store.js';

/**
 * Unenrollment asked by the machine itself (`gf-agent unenroll`): disabled, its token opens
 * nothing, offered nowhere; audited with the machine as the actor, and a fleet event. Returns when.
 */
export function unenrollByMachine(db: Database, machine: { machineId: string; farmId: string }): Promise<Date> {
  return db.transaction(async (tx) => {
    const at = await unenrollMachine(tx, machine.machineId);
    await recordAudit(tx, { actor: { kind: 'machine', id: machine.machineId }, action: 'machine.unenroll', targetType: 'machine', targetId: machine.machineId });
    await recordFleetEvent(tx, { type: 'machine.unenrolled', machineId: machine.machineId, farmId: machine.farmId, message: 'unenrolled from the machine (gf-agent unenroll): its token no longer works' });
    return at;
  });
}
