import {
  gpuHealthReportSchema,
  gpuHealthVerdict,
  machineHealthVerdict,
  GPU_HEALTH_VERDICTS,
  type GpuHealthReport,
  type GpuHealthVerdict,
  type HeartbeatMessage,
  type MachineVerdict,
} from '@gpufarm/shared';

type GpuLive = HeartbeatMessage['gpus'][number];
import { z } from 'zod';
import type { Queryable } from '../db/database.js';
import { loadGpuHealthRows, loadMachineHealthRow } from './gpu-health-store.js';

/**
 * Per-GPU health on the control plane: the verdicts it computes itself from the agents' reports
 * (`shared/src/fleet/gpu-health.ts`), stored on `machine_gpus` (a failed GPU is not offered
 * nor matched), and the read the admin and operator views use.
 */

/** One GPU's verdict as judged from a report, with the report's key (UUID, else index). */
export interface JudgedGpu {
  report: GpuHealthReport;
  verdict: GpuHealthVerdict;
  reasons: string[];
}

export function judgeReports(reports: readonly GpuHealthReport[], now: Date): JudgedGpu[] {
  return reports.map((report) => ({ report, ...gpuHealthVerdict(report, now) }));
}

/** Changes when a verdict or its reasons change (what `machine_gpus` stores). */
export function verdictKey(judged: readonly JudgedGpu[]): string {
  // Judged on every heartbeat: a plain string, with separators no uuid or reason holds.
  let key = '';
  for (const j of judged) key += `${j.report.index}\u0000${j.report.uuid ?? ''}\u0000${j.verdict}\u0000${j.reasons.join('\u0001')}\u0002`;
  return key;
}

/**
 * The reports last sent on a link with the live temperature and utilization of a heartbeat's
 * `gpus` (the agent resends the reports only when something else changed).
 */
export function withLiveFigures(reports: readonly GpuHealthReport[], live: ReadonlyArray<Pick<GpuLive, 'uuid' | 'temperatureC' | 'utilizationPercent'>>): GpuHealthReport[] {
  return reports.map((r, i) => {
    if (r.uuid === null) return r;
    // The agent lists its GPUs in one order in both: look further only when it did not.
    const now = live[i]?.uuid === r.uuid ? live[i] : live.find((g) => g.uuid === r.uuid);
    if (!now || (now.temperatureC === r.temperatureC && now.utilizationPercent === r.utilizationPercent)) return r;
    return { ...r, temperatureC: now.temperatureC, utilizationPercent: now.utilizationPercent };
  });
}

/** One GPU of `machineGpuHealth`. */
export interface GpuHealthView {
  index: number;
  uuid: string | null;
  classId: string;
  busy: boolean;
  verdict: GpuHealthVerdict;
  reasons: string[];
  /** When the verdict last changed; null: never judged (an agent before protocol 4, or simulated). */
  changedAt: string | null;
  /**
   * The last report (counters, XIDs), stored when a counter changed; its temperature,
   * utilization and fan are as of then (the live ones are in `machines.gpu_live`). Null when the
   * agent sent none.
   */
  report: GpuHealthReport | null;
}

export interface MachineGpuHealth {
  machineId: string;
  machine: MachineVerdict;
  gpus: GpuHealthView[];
}

const storedReportsSchema = z.array(gpuHealthReportSchema);
const storedReasonsSchema = z.array(z.string());

/**
 * A machine's per-GPU verdicts as stored, with the last reports, and the machine's verdict
 * (failed when its agent reports it unhealthy or no GPU is usable). Null for an unknown machine.
 */
export async function machineGpuHealth(db: Queryable, machineId: string): Promise<MachineGpuHealth | null> {
  const machine = await loadMachineHealthRow(db, machineId);
  if (!machine) return null;
  const rows = await loadGpuHealthRows(db, machineId);
  const parsedReports = storedReportsSchema.safeParse(machine.gpu_health ?? []);
  const reports = parsedReports.success ? parsedReports.data : [];
  const gpus = rows.map((r): GpuHealthView => {
    const verdict = z.enum(GPU_HEALTH_VERDICTS).catch('healthy').parse(r.health);
    return {
      index: r.gpu_index,
      uuid: r.uuid,
      classId: r.class_id,
      busy: r.busy,
      verdict,
      reasons: storedReasonsSchema.catch([]).parse(r.health_reasons),
      changedAt: r.health_changed_at === null ? null : new Date(r.health_changed_at).toISOString(),
      report: reports.find((p) => (p.uuid !== null ? p.uuid === r.uuid : p.index === r.gpu_index)) ?? null,
    };
  });
  const unhealthy = machine.status === 'unhealthy' ? (machine.health_reason ?? 'the agent reports the machine unhealthy') : null;
  return { machineId, machine: machineHealthVerdict({ machineUnhealthyReason: unhealthy, gpus }), gpus };
}
