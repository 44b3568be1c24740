import {
  derivedGpuClass,
  findGpuClass,
  isDerivedClassId,
  isOfferedArchitecture,
  nvidiaDeviceId,
  type GpuClass,
  type GpuHealthReport,
  type GpuInventory,
  type HeartbeatMessage,
  type HelloMessage,
  type MachineHealth,
  type MachineInventory,
} from '@gpufarm/shared';
import { createBatcher } from '../db/batcher.js';
import type { Database, Queryable } from '../db/database.js';
import { recordFleetEvent, type FleetEventInput } from '../fleet/events.js';
import { ensureDerivedClasses } from '../fleet/store.js';
import { probeMismatch } from '../machine-verification/claims.js';
import { noteClaims } from '../machine-verification/challenge-store.js';

/**
 * What an agent's link writes about its machine: inventory and benchmark at `hello`, health,
 * live figures and uptime at each `heartbeat`. A trigger reloads every replica's offer index
 * when the offered columns of `machines` (status, price, tier, CUDA, driver, simulated…) or
 * any `machine_gpus` row change, so heartbeats write those only when something changed.
 */

/** Machine statuses an agent's own reports set; `disabled` (an operator's) is never overwritten. */
export type LinkStatus = 'online' | 'unhealthy' | 'draining';

/** The `machines` columns taken from an inventory. */
export function inventoryColumns(inventory: MachineInventory) {
  return {
    cudaVersion: inventory.cudaVersion,
    driverVersion: inventory.driverVersion,
    cpuCores: inventory.host.cpuCores,
    ramBytes: inventory.host.ramBytes,
    diskFreeBytes: inventory.host.diskFreeBytes,
    simulated: inventory.simulated,
  };
}

export interface GpuRow {
  gpu_index: number;
  uuid: string;
  class_id: string;
  vram_bytes: number;
}

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
 * Makes the machine's `machine_gpus` match `wanted` without touching reservations: changed or
 * new GPUs are upserted (keeping `busy` and `assignment_id`), GPUs no longer listed are removed
 * unless a live assignment holds them or the agent reports them lost (`lostIndexes`: nvidia-smi
 * cannot read them, so the inventory leaves them out, yet they keep their failed verdict for the
 * fleet views until the card is gone). Writes nothing when nothing changed. Returns whether it wrote.
 */
export async function reconcileGpus(db: Queryable, machineId: string, wanted: readonly GpuRow[], lostIndexes: readonly number[] = []): Promise<boolean> {
  const existing = await db.query<GpuRow & { busy: boolean; assignment_id: string | null }>(
    'SELECT gpu_index, uuid, class_id, vram_bytes, busy, assignment_id FROM machine_gpus WHERE machine_id = $1',
    [machineId],
  );
  const byIndex = new Map(existing.map((g) => [g.gpu_index, g]));
  const upserts = wanted.filter((g) => {
    const had = byIndex.get(g.gpu_index);
    return !had || had.uuid !== g.uuid || had.class_id !== g.class_id || Number(had.vram_bytes) !== g.vram_bytes;
  });
  const wantedIndexes = new Set([...wanted.map((g) => g.gpu_index), ...lostIndexes]);
  const removed = existing.filter((g) => !wantedIndexes.has(g.gpu_index) && !g.busy && g.assignment_id === null).map((g) => g.gpu_index);
  if (upserts.length > 0) {
    await db.query(
      `INSERT INTO machine_gpus (machine_id, gpu_index, uuid, class_id, vram_bytes)
       SELECT $1, x.gpu_index, x.uuid, x.class_id, x.vram_bytes
         FROM jsonb_to_recordset($2::jsonb) AS x(gpu_index int, uuid text, class_id text, vram_bytes bigint)
       ON CONFLICT (machine_id, gpu_index) DO UPDATE SET uuid = excluded.uuid, class_id = excluded.class_id, vram_bytes = excluded.vram_bytes,
         -- Another card in the slot does not inherit the old one's verdict; the next heartbeat judges it.
         health = CASE WHEN machine_gpus.uuid IS DISTINCT FROM excluded.uuid THEN 'healthy' ELSE machine_gpus.health END,
         health_reasons = CASE WHEN machine_gpus.uuid IS DISTINCT FROM excluded.uuid THEN '[]'::jsonb ELSE machine_gpus.health_reasons END`,
      [machineId, JSON.stringify(upserts)],
    );
  }
  if (removed.length > 0) {
    await db.query('DELETE FROM machine_gpus WHERE machine_id = $1 AND gpu_index = ANY($2::int[]) AND NOT busy AND assignment_id IS NULL', [machineId, removed]);
  }
  return upserts.length > 0 || removed.length > 0;
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
  const columns = inventoryColumns(hello.inventory);
  const { status, reason } = reportedStatus(hello.inventory, hello.inventory.health, hello.draining);
  await db.transaction(async (tx) => {
    const [before] = await tx.query<{ status: string }>('SELECT status FROM machines WHERE id = $1 FOR UPDATE', [machineId]);
    const health = before && before.status !== 'disabled' ? healthEvent(machineId, before.status, status, reason) : null;
    if (health) await recordFleetEvent(tx, health);
    await tx.query(
      `UPDATE machines SET
         status = CASE WHEN status = 'disabled' THEN status ELSE $2 END,
         health_reason = $3, agent_version = $4, inventory = $5::jsonb,
         benchmark = coalesce($6::jsonb, benchmark),
         benchmark_tier = CASE WHEN $6::jsonb IS NULL THEN benchmark_tier ELSE $7 END,
         cuda_version = $8, driver_version = $9, cpu_cores = $10, ram_bytes = $11, disk_free_bytes = $12, simulated = $13,
         draining = $14, connected_at = now(), last_heartbeat_at = now(), offline_since = NULL, updated_at = now()
       WHERE id = $1`,
      [
        machineId, status, reason,
        hello.agentVersion, JSON.stringify(hello.inventory), hello.benchmark === null ? null : JSON.stringify(hello.benchmark),
        hello.benchmark?.tier ?? null, columns.cudaVersion, columns.driverVersion, columns.cpuCores, columns.ramBytes,
        columns.diskFreeBytes, columns.simulated, hello.draining,
      ],
    );
    await writeOfferedGpus(tx, machineId, hello.inventory);
    await noteClaims(tx, machineId, hello.inventory);
  });
}

interface HeartbeatRow {
  status: string;
  health_reason: string | null;
  cuda_version: string | null;
  driver_version: string | null;
  simulated: boolean;
}

/**
 * The cheap part of a heartbeat: when it was heard, the live GPU figures, draining, and the
 * status and reason the beat gives the machine. `wantRow`: the row is wanted whatever it holds.
 */
interface HeartbeatBeat {
  machineId: string;
  gpus: HeartbeatMessage['gpus'];
  draining: boolean;
  reported: { status: LinkStatus; reason: string | null } | null;
  wantRow: boolean;
}

/**
 * What the machine's row held once the beat was written: `unchanged` when its status and
 * reason were already the beat's (and the row was not asked for), null when the machine is gone.
 */
type HeartbeatSeen = (HeartbeatRow & { id: string }) | 'unchanged' | null;

/** The mean utilization of the GPUs that report one; null when none does. */
function meanUtilization(gpus: HeartbeatMessage['gpus']): number | null {
  let sum = 0;
  let n = 0;
  for (const g of gpus) {
    if (g.utilizationPercent === null) continue;
    sum += g.utilizationPercent;
    n += 1;
  }
  return n === 0 ? null : sum / n;
}

/**
 * Writes beats of many machines in one statement: heard now, live GPU figures and their mean
 * utilization, draining, and the seconds since each machine's previous beat, at most
 * `maxGapSeconds`, added to today's uptime (UTC, never past 86,400). At 10,000 machines every
 * 10 s a statement per beat would be a thousand round trips a second; the beats of 100 ms go
 * out together (`createBatcher`) as one JSON document, and rows come back only for machines
 * whose status or reason must change, that are gone, or whose row was asked for.
 */
export function heartbeatWriter(db: Queryable, options: { maxGapSeconds: number }): (beat: HeartbeatBeat) => Promise<HeartbeatSeen> {
  return createBatcher(
    async (beats: readonly HeartbeatBeat[]) => {
      const input = JSON.stringify(
        beats.map((b) => ({ id: b.machineId, gpus: b.gpus, util: meanUtilization(b.gpus), draining: b.draining, status: b.reported?.status ?? null, reason: b.reported?.reason ?? null, want_row: b.wantRow })),
      );
      const rows = await db.query<HeartbeatRow & { id: string; found: boolean }>(
        `WITH input AS (
           SELECT * FROM jsonb_to_recordset($1::jsonb) AS i(id text, gpus jsonb, util real, draining boolean, status text, reason text, want_row boolean)
         ),
         prev AS (SELECT m.id, m.last_heartbeat_at AS prev_at FROM machines m JOIN input ON input.id = m.id),
         m AS (
           UPDATE machines SET last_heartbeat_at = now(), gpu_live = input.gpus, gpu_utilization_percent = input.util, draining = input.draining
             FROM input JOIN prev ON prev.id = input.id WHERE machines.id = input.id
           RETURNING machines.id, machines.status, machines.health_reason, machines.cuda_version, machines.driver_version, machines.simulated, prev.prev_at
         ),
         up AS (
           INSERT INTO machine_uptime_days (machine_id, day, seconds_up)
           SELECT m.id, (now() AT TIME ZONE 'UTC')::date, least($2::float8, 86400, round(extract(epoch FROM now() - m.prev_at)))::int
             FROM m WHERE m.prev_at IS NOT NULL AND m.prev_at < now()
           ON CONFLICT (machine_id, day) DO UPDATE SET seconds_up = least(86400, machine_uptime_days.seconds_up + excluded.seconds_up)
         )
         SELECT input.id, m.id IS NOT NULL AS found, m.status, m.health_reason, m.cuda_version, m.driver_version, m.simulated
           FROM input LEFT JOIN m ON m.id = input.id
          WHERE m.id IS NULL OR input.want_row OR m.status IS DISTINCT FROM input.status OR m.health_reason IS DISTINCT FROM input.reason`,
        [input, options.maxGapSeconds],
      );
      const byId = new Map(rows.map((r) => [r.id, r]));
      return beats.map((b): HeartbeatSeen => {
        const row = byId.get(b.machineId);
        if (!row) return 'unchanged';
        return row.found ? row : null;
      });
    },
    // A beat may wait 100 ms: the machine's last-heard time is kept to seconds anyway.
    { maxInFlight: 2, maxBatch: 500, lingerMs: 100 },
  );
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
  context: { write: (beat: HeartbeatBeat) => Promise<HeartbeatSeen>; claimed: Pick<MachineInventory, 'gpus' | 'simulated'> | null; lostIndexes: readonly number[] },
): Promise<boolean> {
  const inventory = heartbeat.inventory;
  const claimed = inventory ?? context.claimed;
  const reported = claimed ? reportedStatus(claimed, heartbeat.health, heartbeat.draining) : null;
  const row = await context.write({ machineId, gpus: heartbeat.gpus, draining: heartbeat.draining, reported, wantRow: inventory !== null || reported === null });
  if (row === 'unchanged') return true;
  if (!row || row.status === 'disabled') return false;
  const { status, reason } = reported ?? reportedStatus({ gpus: [], simulated: row.simulated }, heartbeat.health, heartbeat.draining);
  const sets: string[] = [];
  const params: Array<string | number | boolean | null> = [machineId];
  const set = (column: string, value: string | number | boolean | null) => {
    params.push(value);
    sets.push(`${column} = $${params.length}`);
  };
  if (row.status !== status) {
    set('status', status);
    sets.push('offline_since = NULL');
  }
  if (row.health_reason !== reason) set('health_reason', reason);
  if (inventory) {
    const columns = inventoryColumns(inventory);
    sets.push(`inventory = $${params.push(JSON.stringify(inventory))}::jsonb`);
    set('agent_version', inventory.agentVersion);
    set('cpu_cores', columns.cpuCores);
    set('ram_bytes', columns.ramBytes);
    set('disk_free_bytes', columns.diskFreeBytes);
    if (row.cuda_version !== columns.cudaVersion) set('cuda_version', columns.cudaVersion);
    if (row.driver_version !== columns.driverVersion) set('driver_version', columns.driverVersion);
    if (row.simulated !== columns.simulated) set('simulated', columns.simulated);
  }
  if (sets.length === 0) return true;
  await db.transaction(async (tx) => {
    await tx.query(`UPDATE machines SET ${sets.join(', ')}, updated_at = now() WHERE id = $1`, params);
    const health = healthEvent(machineId, row.status, status, reason);
    if (health) await recordFleetEvent(tx, health);
    if (inventory) {
      await writeOfferedGpus(tx, machineId, inventory, context.lostIndexes);
      await noteClaims(tx, machineId, inventory);
    }
  });
  return true;
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

/**
 * Reserves the GPUs of assignments the agent still holds although the control plane ended them
 * (it requeued them while the machine was cut off), so they are not offered while the old
 * container may still use them; GPUs such a reservation kept from an earlier connection whose
 * assignment the agent no longer holds are freed. Only free GPUs are taken.
 */
export async function holdSupersededGpus(db: Database, machineId: string, assignmentIds: readonly string[]): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query(
      `UPDATE machine_gpus g SET busy = false, assignment_id = NULL FROM assignments a
        WHERE g.machine_id = $1 AND a.id = g.assignment_id AND a.state NOT IN ('offered', 'accepted', 'running') AND NOT (a.id = ANY($2::text[]))`,
      [machineId, assignmentIds],
    );
    if (assignmentIds.length === 0) return;
    await tx.query(
      `UPDATE machine_gpus g SET busy = true, assignment_id = a.id FROM assignments a
        WHERE a.id = ANY($2::text[]) AND a.machine_id = $1 AND a.state NOT IN ('offered', 'accepted', 'running')
          AND g.machine_id = $1 AND g.gpu_index = ANY(a.gpu_indices) AND NOT g.busy AND g.assignment_id IS NULL`,
      [machineId, assignmentIds],
    );
  });
}

/** Frees the GPUs `holdSupersededGpus` reserved for these assignments (the agent let go of them). */
export async function releaseSupersededGpus(db: Queryable, machineId: string, assignmentIds: readonly string[]): Promise<void> {
  await db.query(
    `UPDATE machine_gpus g SET busy = false, assignment_id = NULL FROM assignments a
      WHERE g.machine_id = $1 AND g.assignment_id = ANY($2::text[]) AND a.id = g.assignment_id AND a.state NOT IN ('offered', 'accepted', 'running')`,
    [machineId, assignmentIds],
  );
}

/** An output the machine reported differs from what the server stored: counted against the machine. */
export async function recordHashMismatch(db: Queryable, machineId: string): Promise<void> {
  await db.query('UPDATE machines SET hash_mismatches = hash_mismatches + 1 WHERE id = $1', [machineId]);
}

/** Stores the machine's last GPU health reports (the counters the views and metrics show). */
export async function writeGpuReports(db: Queryable, machineId: string, reports: readonly GpuHealthReport[]): Promise<void> {
  await db.query('UPDATE machines SET gpu_health = $2::jsonb WHERE id = $1', [machineId, JSON.stringify(reports)]);
}

/** The drain asked of the machine (by an admin or its farm), or null when none is. */
export async function drainRequest(db: Queryable, machineId: string): Promise<{ reason: string | null } | null> {
  const [row] = await db.query<{ drain_reason: string | null }>('SELECT drain_reason FROM machines WHERE id = $1 AND drain_requested', [machineId]);
  return row ? { reason: row.drain_reason } : null;
}
