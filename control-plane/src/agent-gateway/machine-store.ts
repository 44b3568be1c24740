import {
  derivedGpuClass,
  findGpuClass,
  isDerivedClassId,
  isOfferedArchitecture,
  nvidiaDeviceId,
  type GpuClass,
  type GpuInventory,
  type HeartbeatMessage,
  type HelloMessage,
  type MachineHealth,
  type MachineInventory,
} from '@gpufarm/shared';
import type { Database, Queryable } from '../db/database.js';
import { recordFleetEvent, type FleetEventInput } from '../fleet/events.js';
import { ensureDerivedClasses } from '../fleet/store.js';
import { reconcileGpus, type GpuRow } from '../machines/gpus-store.js';
import {
  hasLinkChanges,
  lockMachineStatus,
  writeHello,
  writeLinkChanges,
  type HeartbeatBeat,
  type HeartbeatSeen,
  type LinkChanges,
  type LinkStatus,
} from '../machines/store.js';
import { probeMismatch } from '../machine-verification/claims.js';
import { noteClaims } from '../machine-verification/challenge-store.js';

/**
 * What an agent's link reports about its machine, judged here and written by the machines slice
 * (`machines/store.ts`, `machines/gpus-store.ts`): inventory and benchmark at `hello`, health,
 * live figures and uptime at each `heartbeat`; and the assignments the link reads.
 */

/**
 * The class of a GPU the agent reports, as the control plane knows it: a curated class by id; a
 * derived one made again here from the GPU's product name, memory, generation and PCI device id
 * (`derivedGpuClass`), so its label, model and family are the control plane's own words and
 * the id must be the one those facts give. Undefined for a GPU that is not offered (`classId`
 * null), an unknown curated id, or a derived id its facts do not give (an agent of another
 * version, say): such a GPU is not offered and stays visible in `machines.inventory`.
 */
export function reportedGpuClass(gpu: GpuInventory): GpuClass | undefined {
  if (gpu.classId === null) return undefined;
  const curated = findGpuClass(gpu.classId);
  if (curated) return curated;
  if (!isDerivedClassId(gpu.classId) || !gpu.architecture || !isOfferedArchitecture(gpu.architecture)) return undefined;
  const derived = derivedGpuClass({ name: gpu.name, vramBytes: gpu.vramBytes, architecture: gpu.architecture, pciDeviceId: gpu.pciDeviceId ? nvidiaDeviceId(gpu.pciDeviceId) : null });
  return derived.classId === gpu.classId ? derived : undefined;
}

/**
 * The `machine_gpus` rows an inventory offers, and the classes they reference (derived ones
 * are added to `gpu_classes` before the rows: `ensureDerivedClasses`).
 */
export function offeredGpus(inventory: MachineInventory): { rows: GpuRow[]; classes: GpuClass[] } {
  const rows: GpuRow[] = [];
  const classes: GpuClass[] = [];
  for (const gpu of inventory.gpus) {
    const gpuClass = reportedGpuClass(gpu);
    if (!gpuClass) continue;
    classes.push(gpuClass);
    rows.push({ gpu_index: gpu.index, uuid: gpu.uuid, class_id: gpuClass.classId, vram_bytes: gpu.vramBytes > 0 ? gpu.vramBytes : gpuClass.vramBytes });
  }
  return { rows, classes };
}

/** Writes the inventory's offered GPUs: their derived classes first, then the `machine_gpus` rows (`reconcileGpus`). */
export async function writeOfferedGpus(db: Queryable, machineId: string, inventory: MachineInventory, lostIndexes: readonly number[] = []): Promise<boolean> {
  const { rows, classes } = offeredGpus(inventory);
  await ensureDerivedClasses(db, classes);
  return reconcileGpus(db, machineId, rows, lostIndexes);
}

/** The status a machine's own report gives it: unhealthy first, then draining, else online. */
export function linkStatus(health: { status: 'healthy' | 'unhealthy' }, draining: boolean): LinkStatus {
  if (health.status === 'unhealthy') return 'unhealthy';
  return draining ? 'draining' : 'online';
}

/**
 * The status and reason a machine's report gives it: its own health and draining, and
 * unhealthy when the GPU probe's `nvidia-smi -L` contradicts the GPUs it claims.
 */
export function reportedStatus(inventory: Pick<MachineInventory, 'gpus' | 'simulated'>, health: MachineHealth, draining: boolean): { status: LinkStatus; reason: string | null } {
  const mismatch = probeMismatch(inventory.gpus, health, inventory.simulated);
  if (mismatch !== null) return { status: 'unhealthy', reason: mismatch };
  const status = linkStatus(health, draining);
  return { status, reason: status === 'unhealthy' ? health.reason ?? 'the agent reports the machine unhealthy' : null };
}

/**
 * The event of a change into or out of `unhealthy` (written only on the change, never per
 * heartbeat); null for any other change. Offline is left out: the machine's link events tell it.
 */
export function healthEvent(machineId: string, before: string, after: string, reason: string | null): FleetEventInput | null {
  if (before === after || (before !== 'unhealthy' && after !== 'unhealthy')) return null;
  if (after === 'unhealthy') return { type: 'machine.unhealthy', machineId, message: `unhealthy: ${reason ?? 'the agent reports the machine unhealthy'}`, details: { reason } };
  return before === 'unhealthy' && after !== 'offline' ? { type: 'machine.healthy', machineId, message: 'healthy again', details: { status: after } } : null;
}

/**
 * A `hello`: the machine is back (online, unhealthy or draining by its own report; no longer
 * offline), with its inventory, benchmark (kept when the agent sends none) and GPUs.
 */
export async function applyHello(db: Database, machineId: string, hello: HelloMessage): Promise<void> {
  const { status, reason } = reportedStatus(hello.inventory, hello.inventory.health, hello.draining);
  await db.transaction(async (tx) => {
    const before = await lockMachineStatus(tx, machineId);
    const health = before !== null && before !== 'disabled' ? healthEvent(machineId, before, status, reason) : null;
    if (health) await recordFleetEvent(tx, health);
    await writeHello(tx, machineId, { status, reason, agentVersion: hello.agentVersion, inventory: hello.inventory, benchmark: hello.benchmark, draining: hello.draining });
    await writeOfferedGpus(tx, machineId, hello.inventory);
    await noteClaims(tx, machineId, hello.inventory);
  });
}

/** What `recordHeartbeat` judges a heartbeat against: the inventory the link last had from the agent. */
export type ClaimedGpus = Pick<MachineInventory, 'gpus' | 'simulated'> | null;

/**
 * A heartbeat's beat, for the heartbeat writer: the status and reason it gives the machine,
 * judged against `claimed`; the row is asked for when the heartbeat carries a new inventory or
 * there is nothing to judge against yet. `gpusJson`: the frame's text of `gpus` (`frame-gpus.ts`).
 */
export function heartbeatBeat(machineId: string, heartbeat: HeartbeatMessage, claimed: ClaimedGpus, gpusJson: string | null = null): HeartbeatBeat {
  const inventory = heartbeat.inventory ?? claimed;
  const reported = inventory ? reportedStatus(inventory, heartbeat.health, heartbeat.draining) : null;
  return { machineId, gpus: heartbeat.gpus, draining: heartbeat.draining, reported, wantRow: heartbeat.inventory !== null || reported === null, gpusJson };
}

/**
 * The rest of a heartbeat once its beat is written (`row`, what the writer saw): status, health
 * and the inventory's offered columns and GPUs, written only when they changed. Returns false
 * when the machine is gone or an operator disabled it (its link is then refused like an unknown token).
 */
export async function applyHeartbeatRow(
  db: Database,
  machineId: string,
  heartbeat: HeartbeatMessage,
  row: HeartbeatSeen,
  context: { reported: HeartbeatBeat['reported']; lostIndexes: readonly number[] },
): Promise<boolean> {
  if (row === 'unchanged') return true;
  if (!row || row.status === 'disabled') return false;
  const inventory = heartbeat.inventory;
  const { status, reason } = context.reported ?? reportedStatus({ gpus: [], simulated: row.simulated }, heartbeat.health, heartbeat.draining);
  const changes: LinkChanges = {
    ...(row.status !== status ? { status } : {}),
    ...(row.health_reason !== reason ? { healthReason: reason } : {}),
    ...(inventory ? { inventory: { inventory, row } } : {}),
  };
  if (!hasLinkChanges(changes)) return true;
  await db.transaction(async (tx) => {
    await writeLinkChanges(tx, machineId, changes);
    const health = healthEvent(machineId, row.status, status, reason);
    if (health) await recordFleetEvent(tx, health);
    if (inventory) {
      await writeOfferedGpus(tx, machineId, inventory, context.lostIndexes);
      await noteClaims(tx, machineId, inventory);
    }
  });
  return true;
}

/**
 * A `heartbeat`: the beat (`write`, batched with other machines' beats), plus the inventory's
 * columns when the heartbeat carries a new inventory. Status, health and the inventory's offered
 * columns and GPUs are written only when they changed, judged against `claimed`, the inventory
 * the link last had from the agent. Returns false when the machine is gone or an operator
 * disabled it (its link is then refused like an unknown token).
 */
export async function recordHeartbeat(
  db: Database,
  machineId: string,
  heartbeat: HeartbeatMessage,
  context: { write: (beat: HeartbeatBeat) => Promise<HeartbeatSeen>; claimed: ClaimedGpus; lostIndexes: readonly number[] },
): Promise<boolean> {
  const beat = heartbeatBeat(machineId, heartbeat, context.claimed);
  const row = await context.write(beat);
  return applyHeartbeatRow(db, machineId, heartbeat, row, { reported: beat.reported, lostIndexes: context.lostIndexes });
}

export interface AssignmentRow {
  id: string;
  job_id: string;
  machine_id: string;
  state: 'offered' | 'accepted' | 'running' | 'finished' | 'failed' | 'rejected' | 'lost' | 'canceled';
  spec: unknown;
}

/** The machine's live assignments (offered, accepted, running), oldest first. */
export function liveAssignments(db: Queryable, machineId: string): Promise<AssignmentRow[]> {
  return db.query<AssignmentRow>(
    `SELECT id, job_id, machine_id, state, spec FROM assignments
      WHERE machine_id = $1 AND state IN ('offered', 'accepted', 'running') ORDER BY offered_at, id`,
    [machineId],
  );
}

/** Assignments by id (any machine, any state). */
export function findAssignments(db: Queryable, ids: readonly string[]): Promise<AssignmentRow[]> {
  if (ids.length === 0) return Promise.resolve([]);
  return db.query<AssignmentRow>('SELECT id, job_id, machine_id, state, spec FROM assignments WHERE id = ANY($1::text[])', [ids]);
}

/**
 * Where an agent's log batch for `assignmentId` may go: its job, its machine, and whether it is
 * open for lines (live, or ended less than `graceSeconds` ago by the database's clock; a row
 * that ended before `ended_at` existed counts as ended long ago). Null when there is no such assignment.
 */
export async function findLogTarget(
  db: Queryable,
  assignmentId: string,
  graceSeconds: number,
): Promise<{ job_id: string; machine_id: string; open: boolean; last_log_seq: number | null } | null> {
  const [row] = await db.query<{ job_id: string; machine_id: string; open: boolean; last_log_seq: number | null }>(
    `SELECT job_id, machine_id, last_log_seq,
            (state IN ('offered', 'accepted', 'running') OR COALESCE(ended_at > now() - make_interval(secs => $2), false)) AS open
       FROM assignments WHERE id = $1`,
    [assignmentId, graceSeconds],
  );
  return row ?? null;
}
