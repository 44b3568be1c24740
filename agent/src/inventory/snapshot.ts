import { classifyGpu, type GpuHealthReport, type GpuInventory, type HostInventory, type MachineHealth, type MachineInventory } from '@gpufarm/shared';
import type { GpuReading } from './gpu-reader.js';
import type { KernelLogWatcher } from './kernel-log.js';
import { normalizePciBusId } from './nvidia-smi-xml.js';
import type { GpuProbeResult } from './gpu-probe.js';
import type { DriverHostFacts } from './driver-host.js';
import { preOfferChecks, preOfferFailure, type PreOfferCheck } from './pre-offer.js';

/**
 * What the agent knows about its machine at one moment: every GPU it detected, whether they
 * may be offered (`health`), and the host. `toWireInventory` turns it into what leaves the
 * machine, where an unhealthy machine lists no GPUs.
 */
export interface InventorySnapshot {
  agentVersion: string;
  simulated: boolean;
  host: HostInventory;
  detected: GpuInventory[];
  driverVersion: string | null;
  cudaVersion: string | null;
  health: MachineHealth;
  /** Each GPU's health inputs (listed and lost ones); empty when simulated or unread. */
  gpuHealth: GpuHealthReport[];
  /** Why the kernel log (XID errors) cannot be read, null when it can or none is configured. */
  kernelLogProblem: string | null;
  /** The pre-offer checks of this reading (`pre-offer.ts`); empty when simulated. */
  preOffer: PreOfferCheck[];
  collectedAt: string;
}

/** The probe's state as the snapshot needs it: not run yet, or its last result. */
export type ProbeState = { kind: 'not_run' } | { kind: 'done'; result: GpuProbeResult };

/**
 * GPUs from an nvidia-smi reading, each with its class (`classifyGpu`: curated, or derived for a
 * model the catalog does not list) or, when it is not offered, the reason.
 */
export function gpusFromReading(reading: GpuReading): GpuInventory[] {
  if (!reading.ok) return [];
  const { driverVersion, cudaVersion } = reading.report;
  return reading.report.gpus.map((g) => {
    const c = classifyGpu({ name: g.name, vramBytes: g.vramBytes, pciDeviceId: g.pciDeviceId, computeCapability: g.computeCapability, productArchitecture: g.productArchitecture });
    return {
      index: g.index,
      uuid: g.uuid,
      name: g.name,
      classId: c.gpuClass?.classId ?? null,
      vramBytes: g.vramBytes,
      driverVersion,
      cudaVersion,
      temperatureC: g.temperatureC,
      utilizationPercent: g.utilizationPercent === null ? null : Math.min(100, Math.max(0, g.utilizationPercent)),
      memoryUsedBytes: g.memoryUsedBytes,
      powerDrawWatts: g.powerDrawWatts,
      powerLimitWatts: g.powerLimitWatts,
      simulated: false,
      architecture: c.architecture,
      computeCapability: c.computeCapability,
      // Only the id's own spelling travels: the message schema refuses anything longer.
      pciDeviceId: g.pciDeviceId !== null && /^(0x)?[0-9a-f]{8}$/i.test(g.pciDeviceId) ? g.pciDeviceId : null,
      notOfferedReason: c.reason === null ? null : c.reason.slice(0, 500),
    };
  });
}

/** A GPU the agent read before: a lost one is reported under this UUID and index. */
export interface KnownGpu {
  uuid: string;
  index: number;
}

/**
 * The health report of each GPU in a reading: nvidia-smi's figures plus the kernel log's XIDs
 * for its PCI bus id. A lost GPU is named by the UUID it had when last read (`known`, by
 * normalized PCI bus id) or the one the driver logged for its address.
 */
export function gpuHealthReports(reading: GpuReading | null, kernelLog: Pick<KernelLogWatcher, 'xidsFor' | 'uuidAt'> | null, known: ReadonlyMap<string, KnownGpu>): GpuHealthReport[] {
  if (reading === null || !reading.ok) return [];
  const reports: GpuHealthReport[] = reading.report.gpus.map((g) => ({
    index: g.index,
    uuid: g.uuid,
    pciBusId: g.pciBusId,
    lost: false,
    lostReason: null,
    ...g.health,
    temperatureC: g.temperatureC,
    utilizationPercent: g.utilizationPercent === null ? null : Math.min(100, Math.max(0, g.utilizationPercent)),
    xids: kernelLog?.xidsFor(g.pciBusId) ?? [],
  }));
  for (const l of reading.report.lost) {
    const bus = l.pciBusId === null ? null : normalizePciBusId(l.pciBusId);
    const before = bus === null ? undefined : known.get(bus);
    reports.push({
      index: before?.index ?? l.index,
      uuid: before?.uuid ?? kernelLog?.uuidAt(l.pciBusId) ?? null,
      pciBusId: l.pciBusId,
      lost: true,
      lostReason: l.reason,
      ecc: { volatileCorrectable: null, volatileUncorrectable: null, aggregateCorrectable: null, aggregateUncorrectable: null },
      retiredPages: { singleBit: null, doubleBit: null, pending: null },
      remappedRows: { correctable: null, uncorrectable: null, pending: null, failure: null },
      clockEvents: { hwSlowdown: null, hwThermalSlowdown: null, hwPowerBrakeSlowdown: null, swThermalSlowdown: null, swPowerCap: null },
      temperatureC: null,
      slowdownTempC: null,
      shutdownTempC: null,
      fanPercent: null,
      utilizationPercent: null,
      pcie: { currentGen: null, maxGen: null, currentWidth: null, maxWidth: null },
      xids: kernelLog?.xidsFor(l.pciBusId) ?? [],
      persistenceMode: null,
      fabric: null,
    });
  }
  return reports.sort((a, b) => a.index - b.index).slice(0, 64);
}

/** The probe's state in the health's words. */
function probeWord(probe: ProbeState): MachineHealth['gpuProbe'] {
  return probe.kind === 'not_run' ? 'not_run' : probe.result.ok ? 'passed' : 'failed';
}

/**
 * The health rule (pure): simulated machines are healthy; a real one is healthy only when
 * nvidia-smi listed GPUs, every pre-offer check passed (`pre-offer.ts`: driver libraries,
 * fabric manager), no running job's container lost its GPUs since the last probe
 * (`containerGpuLoss`, a reason with its fix) and the container probe saw them all. A failed
 * check is the reason even when nvidia-smi cannot run (a driver/library mismatch), so the
 * machine is never merely "without GPUs".
 */
export function decideHealth(input: { simulated: boolean; reading: GpuReading | null; probe: ProbeState; host?: DriverHostFacts | null; containerGpuLoss?: string | null; now: Date }): MachineHealth {
  const checkedAt = input.now.toISOString();
  if (input.simulated) return { status: 'healthy', reason: null, gpuProbe: 'simulated', checkedAt };
  const reading = input.reading;
  const failure = preOfferFailure(preOfferChecks(reading, input.host ?? null));
  if (reading === null || !reading.ok) {
    // The GPUs are there (a driver/library mismatch hides them from nvidia-smi): not "no GPUs".
    if (failure !== null) return { status: 'unhealthy', reason: failure, gpuProbe: probeWord(input.probe), checkedAt };
    const reason = reading?.reason ?? 'the GPUs were not read';
    return { status: 'unhealthy', reason: reading?.ok === false && reading.missing ? `${reason}; install the NVIDIA driver, or run with --simulate-gpus for a machine without GPUs` : reason, gpuProbe: 'no_gpus', checkedAt };
  }
  if (reading.report.gpus.length === 0) return { status: 'unhealthy', reason: 'nvidia-smi lists no GPU', gpuProbe: 'no_gpus', checkedAt };
  if (failure !== null) return { status: 'unhealthy', reason: failure, gpuProbe: probeWord(input.probe), checkedAt };
  if (input.containerGpuLoss) return { status: 'unhealthy', reason: input.containerGpuLoss, gpuProbe: 'failed', checkedAt };
  if (input.probe.kind === 'not_run') return { status: 'unhealthy', reason: 'the GPU container probe has not run yet: GPUs are offered once a container has seen them', gpuProbe: 'not_run', checkedAt };
  if (!input.probe.result.ok) return { status: 'unhealthy', reason: `GPU container probe failed: ${input.probe.result.reason}`, gpuProbe: 'failed', checkedAt };
  return { status: 'healthy', reason: null, gpuProbe: 'passed', probeListing: input.probe.result.listed.slice(0, 64), checkedAt };
}

/** What leaves the machine: GPUs only when healthy. */
export function toWireInventory(s: InventorySnapshot): MachineInventory {
  return {
    agentVersion: s.agentVersion,
    simulated: s.simulated,
    host: s.host,
    gpus: s.health.status === 'healthy' ? s.detected : [],
    detectedGpuCount: s.detected.length,
    driverVersion: s.driverVersion,
    cudaVersion: s.cudaVersion,
    health: s.health,
    collectedAt: s.collectedAt,
  };
}

/**
 * A key that changes when anything but live figures and times changes (GPU count, model,
 * UUID, driver, health, host): the link sends the whole inventory again when it does.
 */
export function inventoryKey(inv: MachineInventory): string {
  return JSON.stringify({
    simulated: inv.simulated,
    host: { ...inv.host, diskFreeBytes: Math.round(inv.host.diskFreeBytes / 2 ** 30) },
    gpus: inv.gpus.map((g) => [g.uuid, g.name, g.classId, g.vramBytes, g.driverVersion, g.cudaVersion, g.powerLimitWatts, g.notOfferedReason ?? null]),
    detected: inv.detectedGpuCount,
    driver: inv.driverVersion,
    cuda: inv.cudaVersion,
    health: [inv.health.status, inv.health.reason, inv.health.gpuProbe, inv.health.probeListing ?? null],
  });
}
