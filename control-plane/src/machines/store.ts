import type { EnrollRequest, GpuHealthReport, HeartbeatMessage, HelloMessage, MachineInventory } from '@gpufarm/shared';
import type { ExecutionConfig } from '../config.js';
import { createBatcher, type Batcher } from '../db/batcher.js';
import type { Queryable } from '../db/database.js';

/**
 * The `machines` table's one writer (with `gpus-store.ts`, `drain-store.ts` and
 * `verification-store.ts` of this folder): a new machine at enrollment, what its link reports
 * (hello, heartbeats, uptime), liveness, price and unenrollment. The slices that decide these
 * (the gateway, the farms, the operator area) call here. A trigger reloads every replica's offer
 * index when the offered columns (status, price, tier, CUDA, driver, simulated…) change, so the
 * link's writes touch those only when something changed.
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

/** Registers an enrolled machine, `offline` until its link says hello (its GPUs: `gpus-store.ts`). */
export async function insertEnrolledMachine(
  tx: Queryable,
  machine: { id: string; farmId: string; regionKey: string; pricePerGpuHourMicroUsd: number | null; tokenHash: string; request: EnrollRequest },
): Promise<void> {
  const { request } = machine;
  const columns = inventoryColumns(request.inventory);
  await tx.query(
    `INSERT INTO machines (id, farm_id, region_key, status, price_per_gpu_hour_micro_usd, cuda_version, driver_version,
       cpu_cores, ram_bytes, disk_free_bytes, simulated, token_hash, public_key_pem, agent_version, inventory)
     VALUES ($1, $2, $3, 'offline', $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
    [
      machine.id, machine.farmId, machine.regionKey, machine.pricePerGpuHourMicroUsd, columns.cudaVersion, columns.driverVersion,
      columns.cpuCores, columns.ramBytes, columns.diskFreeBytes, columns.simulated, machine.tokenHash,
      request.publicKeyPem, request.agentVersion, JSON.stringify(request.inventory),
    ],
  );
}

/** Marks silent machines offline; returns their ids. Seeded machines (no token) never connect and are left alone. */
export async function markSilentMachinesOffline(db: Queryable, config: Pick<ExecutionConfig, 'machineOfflineSeconds'>): Promise<string[]> {
  const rows = await db.query<{ id: string }>(
    `UPDATE machines SET status = 'offline', offline_since = now(), updated_at = now()
      WHERE status IN ('online', 'unhealthy', 'draining') AND token_hash IS NOT NULL
        AND (last_heartbeat_at IS NULL OR last_heartbeat_at < now() - make_interval(secs => $1))
      RETURNING id`,
    [config.machineOfflineSeconds],
  );
  return rows.map((r) => r.id);
}

/** Sets the price of the farm's machines with a GPU of the class; returns their ids. */
export async function setClassPrice(db: Queryable, params: { farmId: string; classId: string; price: number | null }): Promise<string[]> {
  const rows = await db.query<{ id: string }>(
    `UPDATE machines m SET price_per_gpu_hour_micro_usd = $3, updated_at = now()
      WHERE m.farm_id = $1 AND m.unenrolled_at IS NULL AND EXISTS (SELECT 1 FROM machine_gpus g WHERE g.machine_id = m.id AND g.class_id = $2)
      RETURNING m.id`,
    [params.farmId, params.classId, params.price],
  );
  return rows.map((r) => r.id);
}

/** Sets one machine's price; false when it is none of the farms'. */
export async function setMachinePrice(db: Queryable, params: { farmIds: readonly string[]; machineId: string; price: number | null }): Promise<boolean> {
  const rows = await db.query(
    `UPDATE machines SET price_per_gpu_hour_micro_usd = $3, updated_at = now() WHERE id = $2 AND farm_id = ANY($1::text[]) RETURNING id`,
    [params.farmIds, params.machineId, params.price],
  );
  return rows.length > 0;
}

/** Unenrolls a machine: disabled (its token opens no link and no HTTP route), so offered nowhere. Returns when it happened. */
export async function unenrollMachine(db: Queryable, machineId: string): Promise<Date> {
  const [row] = await db.query<{ unenrolled_at: Date }>(
    `UPDATE machines SET status = 'disabled', unenrolled_at = coalesce(unenrolled_at, now()), updated_at = now() WHERE id = $1 RETURNING unenrolled_at`,
    [machineId],
  );
  if (!row) throw new Error(`no machine ${machineId}`);
  return row.unenrolled_at;
}

/** The machine's status, its row locked for update (inside a transaction); null when there is no such machine. */
export async function lockMachineStatus(tx: Queryable, machineId: string): Promise<string | null> {
  const [row] = await tx.query<{ status: string }>('SELECT status FROM machines WHERE id = $1 FOR UPDATE', [machineId]);
  return row?.status ?? null;
}

/**
 * A `hello`: the machine is back (`status` by its own report, unless an operator disabled it),
 * with its inventory, benchmark (kept when the agent sends none) and draining; heard now.
 */
export async function writeHello(
  tx: Queryable,
  machineId: string,
  hello: { status: LinkStatus; reason: string | null; agentVersion: string; inventory: MachineInventory; benchmark: HelloMessage['benchmark']; draining: boolean },
): Promise<void> {
  const columns = inventoryColumns(hello.inventory);
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
      machineId, hello.status, hello.reason,
      hello.agentVersion, JSON.stringify(hello.inventory), hello.benchmark === null ? null : JSON.stringify(hello.benchmark),
      hello.benchmark?.tier ?? null, columns.cudaVersion, columns.driverVersion, columns.cpuCores, columns.ramBytes,
      columns.diskFreeBytes, columns.simulated, hello.draining,
    ],
  );
}

/** What the heartbeat writer returns of a machine's row. */
export interface HeartbeatRow {
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
export interface HeartbeatBeat {
  machineId: string;
  gpus: HeartbeatMessage['gpus'];
  draining: boolean;
  reported: { status: LinkStatus; reason: string | null } | null;
  wantRow: boolean;
  /**
   * `gpus` as the frame spelled it (`agent-gateway/frame-gpus.ts`), a text whose jsonb is the
   * value of `gpus`; null or absent: `gpus` is serialized again.
   */
  gpusJson?: string | null;
}

/**
 * What the machine's row held once the beat was written: `unchanged` when its status and
 * reason were already the beat's (and the row was not asked for), null when the machine is gone.
 */
export type HeartbeatSeen = (HeartbeatRow & { id: string }) | 'unchanged' | null;

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
 * The writer's input: the beats as one JSON array of `{ id, gpus, util, draining, status,
 * reason, want_row }`, written out as text, each beat's `gpus` from `gpusJson` when it has one.
 */
export function heartbeatInput(beats: readonly HeartbeatBeat[]): string {
  let out = '[';
  for (let i = 0; i < beats.length; i++) {
    const b = beats[i]!;
    const util = meanUtilization(b.gpus);
    const status = b.reported?.status ?? null;
    const reason = b.reported?.reason ?? null;
    if (i > 0) out += ',';
    // Without a cut, one JSON.stringify of the whole beat costs less than one of its `gpus` and the rest by hand.
    if (b.gpusJson == null) out += JSON.stringify({ id: b.machineId, gpus: b.gpus, util, draining: b.draining, status, reason, want_row: b.wantRow });
    // String() of a finite number is its JSON text; a mean of figures is finite.
    else out += `{"id":${JSON.stringify(b.machineId)},"gpus":${b.gpusJson},"util":${util === null ? 'null' : String(util)},"draining":${b.draining},"status":${JSON.stringify(status)},"reason":${JSON.stringify(reason)},"want_row":${b.wantRow}}`;
  }
  return `${out}]`;
}

/** The shared heartbeat writer (`heartbeatWriter`): a beat's promise, or `send` with callbacks and no promise. */
export type HeartbeatWriter = Batcher<HeartbeatBeat, HeartbeatSeen>;

/**
 * Writes beats of many machines in one statement: heard now, live GPU figures and their mean
 * utilization, draining, and the seconds since each machine's previous beat, at most
 * `maxGapSeconds`, added to today's uptime (UTC, never past 86,400). At 10,000 machines every
 * 10 s a statement per beat would be a thousand round trips a second; the beats of 100 ms go
 * out together (`createBatcher`) as one JSON document, and rows come back only for machines
 * whose status or reason must change, that are gone, or whose row was asked for.
 */
export function heartbeatWriter(db: Queryable, options: { maxGapSeconds: number }): HeartbeatWriter {
  return createBatcher(
    async (beats: readonly HeartbeatBeat[]) => {
      const input = heartbeatInput(beats);
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

/** The columns a heartbeat changes beyond the beat itself; empty when nothing changed. */
export interface LinkChanges {
  /** A new status (it clears `offline_since`). */
  status?: LinkStatus;
  healthReason?: string | null;
  /** A new inventory: stored whole, its offered columns only where they changed from `row`. */
  inventory?: { inventory: MachineInventory; row: Pick<HeartbeatRow, 'cuda_version' | 'driver_version' | 'simulated'> };
}

/** Whether `changes` would write anything. */
export function hasLinkChanges(changes: LinkChanges): boolean {
  return changes.status !== undefined || changes.healthReason !== undefined || changes.inventory !== undefined;
}

/** Writes a heartbeat's changes (`LinkChanges`) in one UPDATE. */
export async function writeLinkChanges(tx: Queryable, machineId: string, changes: LinkChanges): Promise<void> {
  const sets: string[] = [];
  const params: Array<string | number | boolean | null> = [machineId];
  const set = (column: string, value: string | number | boolean | null) => {
    params.push(value);
    sets.push(`${column} = $${params.length}`);
  };
  if (changes.status !== undefined) {
    set('status', changes.status);
    sets.push('offline_since = NULL');
  }
  if (changes.healthReason !== undefined) set('health_reason', changes.healthReason);
  if (changes.inventory) {
    const { inventory, row } = changes.inventory;
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
  if (sets.length === 0) return;
  await tx.query(`UPDATE machines SET ${sets.join(', ')}, updated_at = now() WHERE id = $1`, params);
}

/** An output the machine reported differs from what the server stored: counted against the machine. */
export async function recordHashMismatch(db: Queryable, machineId: string): Promise<void> {
  await db.query('UPDATE machines SET hash_mismatches = hash_mismatches + 1 WHERE id = $1', [machineId]);
}

/** Stores the machine's last GPU health reports (the counters the views and metrics show). */
export async function writeGpuReports(db: Queryable, machineId: string, reports: readonly GpuHealthReport[]): Promise<void> {
  await db.query('UPDATE machines SET gpu_health = $2::jsonb WHERE id = $1', [machineId, JSON.stringify(reports)]);
}

/** Whether the machine exists (enrolled or seeded; an unenrolled one too). */
export async function machineExists(db: Queryable, machineId: string): Promise<boolean> {
  const rows = await db.query('SELECT 1 FROM machines WHERE id = $1', [machineId]);
  return rows.length > 0;
}

/** The drain asked of the machine (by an admin or its farm), or null when none is. */
export async function drainRequest(db: Queryable, machineId: string): Promise<{ reason: string | null } | null> {
  const [row] = await db.query<{ drain_reason: string | null }>('SELECT drain_reason FROM machines WHERE id = $1 AND drain_requested', [machineId]);
  return row ? { reason: row.drain_reason } : null;
}
