import { earningVerdict, machineState, type EarningVerdict, type MachineState } from '@gpufarm/shared';
import type { EnrollmentTokenRow } from '../farms/store.js';
import type { MachineFactsRow } from './store.js';

/** The operator area's answers, shaped from their rows (also the machine's own `gf-agent status`). */

export function iso(at: Date | null): string | null {
  return at === null ? null : new Date(at).toISOString();
}

/** The machine's state by the shared rules (`machineState`), as the admin table decides it. */
function operatorMachineState(m: MachineFactsRow): MachineState {
  return machineState({
    status: m.status,
    cordoned: m.cordoned,
    drainRequested: m.drainRequested,
    gpus: m.gpus.length,
    failedGpus: m.gpus.filter((g) => g.verdict === 'failed').length,
    troubledGpus: m.gpus.filter((g) => g.verdict !== 'healthy').length,
    busy: m.gpusBusy,
  });
}

/**
 * The GPUs the agent detected that are not offered, with why: the agent's reason (an old
 * generation, say), or that the control plane does not know the class it reported.
 */
export function notOfferedGpus(m: Pick<MachineFactsRow, 'gpus' | 'inventoryGpus'>): Array<{ index: number; name: string; reason: string }> {
  const offered = new Set(m.gpus.map((g) => g.index));
  return (m.inventoryGpus ?? [])
    .filter((g) => !offered.has(g.index))
    .map((g) => ({
      index: g.index,
      name: g.name,
      reason: g.notOfferedReason ?? (g.classId === null ? 'its model is not in the class catalog of the agent that reported it; upgrade gf-agent' : `the control plane does not know its class ${g.classId}; upgrade gf-agent`),
    }));
}

/** The verdict of a machine row, with the going prices of its classes. */
export function machineEarning(m: MachineFactsRow, going: ReadonlyArray<{ classId: string; medianPerGpuHourMicroUsd: number | null }>): EarningVerdict {
  return earningVerdict({
    status: m.status,
    lastHeartbeatAt: iso(m.lastHeartbeatAt),
    offlineSince: iso(m.offlineSince),
    unenrolledAt: iso(m.unenrolledAt),
    healthReason: m.healthReason,
    probe: { state: m.probeState, output: m.probeOutput },
    gpus: m.gpus,
    driverVersion: m.driverVersion,
    pricePerGpuHourMicroUsd: m.pricePerGpuHourMicroUsd,
    drainRequested: m.drainRequested,
    drainSetBy: m.drainSetBy,
    cordoned: m.cordoned,
    farmStatus: m.farmStatus,
    verification: m.verification,
    verificationReason: m.verificationReason,
    currentJob: m.currentJobId ? { jobId: m.currentJobId, since: iso(m.currentJobSince) } : null,
    goingPrices: going,
    classes: m.gpus.map((g) => ({ classId: g.classId, label: g.label, architecture: g.architecture })),
    notOffered: notOfferedGpus(m),
  });
}

export function operatorMachineView(m: MachineFactsRow, going: ReadonlyArray<{ classId: string; medianPerGpuHourMicroUsd: number | null }>) {
  return {
    id: m.id,
    farm: { id: m.farmId, slug: m.farmSlug },
    regionKey: m.regionKey,
    state: operatorMachineState(m),
    earning: machineEarning(m, going),
    gpus: m.gpus.map((g) => ({ index: g.index, classId: g.classId, label: g.label, verdict: g.verdict, reasons: g.reasons })),
    /** GPUs the agent detected but does not offer, each with why (never just a missing row). */
    notOfferedGpus: notOfferedGpus(m),
    pricePerGpuHourMicroUsd: m.pricePerGpuHourMicroUsd,
    agentVersion: m.agentVersion,
    driverVersion: m.driverVersion,
    cudaVersion: m.cudaVersion,
    benchmarkTier: m.benchmarkTier,
    /** Whether the machine's GPUs passed a GPU challenge and when; the reason when the last one failed. */
    gpuProof: { verification: m.verification, reason: m.verificationReason, simulated: m.simulated, provenAt: iso(m.provenAt) },
    lastHeartbeatAt: iso(m.lastHeartbeatAt),
    drainRequested: m.drainRequested || m.status === 'draining',
    currentJobId: m.currentJobId,
  };
}

export function tokenView(t: EnrollmentTokenRow) {
  return {
    id: t.id,
    farmSlug: t.farmSlug,
    regionKey: t.regionKey,
    pricePerGpuHourMicroUsd: t.pricePerGpuHourMicroUsd,
    label: t.label,
    createdAt: iso(t.createdAt),
    expiresAt: iso(t.expiresAt),
    usedAt: iso(t.usedAt),
    machineId: t.machineId,
    revokedAt: iso(t.revokedAt),
  };
}
