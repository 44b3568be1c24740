import type { Database } from '../db/database.js';
import { describeActor, recordAudit, type AuditActor } from '../fleet/audit.js';
import { recordFleetEvent } from '../fleet/events.js';
import { lockFarmStatus, writeFarmQuarantine } from './store.js';

export interface FarmQuarantineState {
  farmId: string;
  status: 'active' | 'quarantined';
  quarantineReason: string | null;
}

/**
 * Quarantines a farm (none of its machines offered; running jobs finish) or lifts it. A farm
 * `suspended` before quarantine existed counts as quarantined and is lifted the same way. Null: no farm.
 */
export async function setFarmQuarantine(
  db: Database,
  input: { farmId: string; quarantine: boolean; reason: string | null; actor: AuditActor },
): Promise<FarmQuarantineState | null> {
  return db.transaction(async (tx) => {
    const before = await lockFarmStatus(tx, input.farmId);
    if (before === null) return null;
    await writeFarmQuarantine(tx, input.farmId, { quarantined: input.quarantine, reason: input.reason });
    await recordAudit(tx, { actor: input.actor, action: input.quarantine ? 'farm.quarantine' : 'farm.unquarantine', targetType: 'farm', targetId: input.farmId, details: { reason: input.reason } });
    if ((before === 'active') === input.quarantine) {
      await recordFleetEvent(tx, {
        type: input.quarantine ? 'farm.quarantined' : 'farm.unquarantined',
        farmId: input.farmId,
        message: input.quarantine ? `farm quarantined by ${describeActor(input.actor)}${input.reason ? `: ${input.reason}` : ''}` : `quarantine lifted by ${describeActor(input.actor)}`,
        details: { reason: input.reason, actor: input.actor },
      });
    }
    return { farmId: input.farmId, status: input.quarantine ? 'quarantined' : 'active', quarantineReason: input.quarantine ? input.reason : null };
  });
}
