import { ApiError } from '@gpufarm/shared';
import type { Database } from '../db/database.js';
import { describeActor, recordAudit, type AuditActor } from '../fleet/audit.js';
import { recordFleetEvent } from '../fleet/events.js';
import { notifyAgent } from '../dispatch/store.js';
import { readDrainRow, writeCordon, writeDrain, type DrainRow, type DrainSetter } from './drain-store.js';

/**
 * Taking machines out of service. Drain: no new assignment (the offer index and the matcher skip
 * the machine), the agent gets the protocol `drain` from whichever replica holds its link,
 * running jobs finish, and what still runs at the deadline is stopped and requeued (the execution
 * worker's drain deadline sweep). Cordon: no new assignment, the agent is not told, nothing is
 * stopped. (A whole farm: `farms/quarantine.ts`.) Each change records an audit entry (and an
 * event when it changed something) in its transaction.
 */

export type { DrainSetter };

export interface MachineDrainState {
  machineId: string;
  drainRequested: boolean;
  /** Who asked for the drain; null when not drained. */
  drainSetBy: DrainSetter | null;
  drainDeadline: Date | null;
  drainReason: string | null;
  cordoned: boolean;
}

function stateOf(row: DrainRow): MachineDrainState {
  return { machineId: row.id, drainRequested: row.drain_requested, drainSetBy: row.drain_set_by, drainDeadline: row.drain_deadline, drainReason: row.drain_reason, cordoned: row.cordoned };
}

/** The kind of drain an actor sets: admins (wallet or token) set an admin's; the farm's wallets and the machine itself an operator's. */
export function drainSetterOf(actor: AuditActor): DrainSetter {
  return actor.kind === 'admin_wallet' || actor.kind === 'admin_token' ? 'admin' : 'operator';
}

/** The drain and cordon of a machine, or null when there is no such machine. */
export async function machineDrainState(db: Database, machineId: string): Promise<MachineDrainState | null> {
  const row = await readDrainRow(db, machineId);
  return row ? stateOf(row) : null;
}

/**
 * Drains (`drain: true`) or undrains a machine. Draining again replaces the deadline and reason;
 * undraining clears them. The agent is told when the drain starts or ends. A drain carries who
 * set it (`drainSetterOf`): an admin's drain is lifted by an admin only (an operator's undrain
 * is 403 `forbidden`, and an operator's drain leaves it as it is); an admin lifts or takes over
 * any drain. Null: no machine.
 */
export async function setMachineDrain(
  db: Database,
  input: { machineId: string; drain: boolean; deadline: Date | null; reason: string | null; actor: AuditActor },
): Promise<MachineDrainState | null> {
  const setBy = drainSetterOf(input.actor);
  return db.transaction(async (tx) => {
    const before = await readDrainRow(tx, input.machineId, { lock: true });
    if (!before) return null;
    if (before.drain_requested && before.drain_set_by === 'admin' && setBy === 'operator') {
      if (input.drain) return stateOf(before);
      throw new ApiError('forbidden', `An admin drained machine ${input.machineId}${before.drain_reason ? ` (${before.drain_reason})` : ''}: only an admin lifts that drain.`);
    }
    const state = stateOf((await writeDrain(tx, input.machineId, { requested: input.drain, setBy, deadline: input.deadline, reason: input.reason }))!);
    const details = { deadline: state.drainDeadline?.toISOString() ?? null, reason: state.drainReason, ...(input.drain ? { setBy } : {}) };
    await recordAudit(tx, { actor: input.actor, action: input.drain ? 'machine.drain' : 'machine.undrain', targetType: 'machine', targetId: input.machineId, details });
    if (input.drain || before.drain_requested) {
      await recordFleetEvent(tx, {
        type: input.drain ? 'machine.drained' : 'machine.undrained',
        machineId: input.machineId,
        message: input.drain
          ? `drain asked by ${describeActor(input.actor)}${state.drainReason ? `: ${state.drainReason}` : ''}${state.drainDeadline ? `; jobs still running at ${state.drainDeadline.toISOString()} are stopped and requeued` : ''}`
          : `drain lifted by ${describeActor(input.actor)}`,
        details: { ...details, actor: input.actor },
      });
    }
    if (before.drain_requested !== input.drain) {
      await notifyAgent(tx, { machineId: input.machineId, kind: 'drain', undrain: !input.drain, ...(state.drainReason ? { reason: state.drainReason } : {}) });
    }
    return state;
  });
}

/** Cordons or uncordons a machine (admins only): not offered while cordoned; the agent is not told. Null: no machine. */
export async function setMachineCordon(
  db: Database,
  input: { machineId: string; cordon: boolean; reason: string | null; actor: AuditActor },
): Promise<MachineDrainState | null> {
  return db.transaction(async (tx) => {
    const before = await readDrainRow(tx, input.machineId, { lock: true });
    if (!before) return null;
    const row = await writeCordon(tx, input.machineId, { cordoned: input.cordon, reason: input.reason });
    await recordAudit(tx, { actor: input.actor, action: input.cordon ? 'machine.cordon' : 'machine.uncordon', targetType: 'machine', targetId: input.machineId, details: { reason: input.reason } });
    if (before.cordoned !== input.cordon) {
      await recordFleetEvent(tx, {
        type: input.cordon ? 'machine.cordoned' : 'machine.uncordoned',
        machineId: input.machineId,
        message: input.cordon ? `cordoned by ${describeActor(input.actor)}${input.reason ? `: ${input.reason}` : ''}` : `cordon lifted by ${describeActor(input.actor)}`,
        details: { reason: input.reason, actor: input.actor },
      });
    }
    return stateOf(row!);
  });
}
