import type { GpuInventory, HostInventory } from '@gpufarm/shared';
import type { GpuProbe } from './gpu-probe.js';
import type { GpuReader, GpuReading } from './gpu-reader.js';
import { simulatedGpus, type SimulatedGpuSpec } from './simulated.js';
import { decideHealth, gpuHealthReports, gpusFromReading, type InventorySnapshot, type KnownGpu, type ProbeState } from './snapshot.js';
import type { KernelLogWatcher } from './kernel-log.js';
import { normalizePciBusId } from './nvidia-smi-xml.js';
import type { HostReader } from './host.js';

export interface InventoryDeps {
  gpus: GpuReader;
  host: HostReader;
  /** Null: the probe is never run (the machine stays unhealthy unless simulated). */
  probe: GpuProbe | null;
  /** The kernel log's XIDs; null: none are read. */
  kernelLog?: KernelLogWatcher | null;
  now: () => Date;
}

export interface InventoryOptions {
  agentVersion: string;
  /** Simulated mode: these GPUs, no nvidia-smi and no probe. */
  simulate: SimulatedGpuSpec[] | null;
  /** Host facts are re-read at most this often (the GPUs on every refresh). */
  hostRefreshMs: number;
  /** A passed probe is repeated this often; a failed one, and any GPU/driver change, sooner. */
  probeIntervalMs: number;
  probeRetryMs: number;
}

/**
 * Keeps the machine's inventory current: `refresh()` re-reads the GPUs (nvidia-smi), the host
 * facts when stale, and runs the container probe when the GPU set or driver changed, when the
 * last probe failed (after `probeRetryMs`) or when the last pass is older than `probeIntervalMs`.
 */
export class InventoryMonitor {
  private host: { value: HostInventory; at: number } | null = null;
  private probeState: ProbeState = { kind: 'not_run' };
  private probeKey = '';
  private probeAt = 0;
  private last: InventorySnapshot | null = null;
  /** Every GPU read since start, by normalized PCI bus id: a lost GPU keeps its UUID and index. */
  private readonly known = new Map<string, KnownGpu>();

  constructor(private readonly deps: InventoryDeps, private readonly options: InventoryOptions) {}

  /** The latest snapshot, or null before the first refresh. */
  get latest(): InventorySnapshot | null {
    return this.last;
  }

  async refresh(): Promise<InventorySnapshot> {
    const now = this.deps.now();
    const t = now.getTime();
    if (this.host === null || t - this.host.at >= this.options.hostRefreshMs) this.host = { value: await this.deps.host.read(), at: t };
    let detected: GpuInventory[];
    let reading: GpuReading | null = null;
    if (this.options.simulate) {
      detected = simulatedGpus(this.options.simulate);
    } else {
      reading = await this.deps.gpus.read();
      detected = gpusFromReading(reading);
      this.deps.kernelLog?.poll();
      if (reading.ok) {
        for (const g of reading.report.gpus) {
          const bus = g.pciBusId === null ? null : normalizePciBusId(g.pciBusId);
          if (bus !== null) this.known.set(bus, { uuid: g.uuid, index: g.index });
        }
      }
      await this.maybeProbe(reading, detected, t);
    }
    const driverVersion = reading?.ok ? reading.report.driverVersion : null;
    const cudaVersion = reading?.ok ? reading.report.cudaVersion : null;
    const snapshot: InventorySnapshot = {
      agentVersion: this.options.agentVersion,
      simulated: this.options.simulate !== null,
      host: this.host.value,
      detected,
      driverVersion,
      cudaVersion,
      health: decideHealth({ simulated: this.options.simulate !== null, reading, probe: this.probeState, now: this.deps.now() }),
      gpuHealth: gpuHealthReports(reading, this.deps.kernelLog ?? null, this.known),
      kernelLogProblem: this.deps.kernelLog?.problem ?? null,
      collectedAt: now.toISOString(),
    };
    this.last = snapshot;
    return snapshot;
  }

  private async maybeProbe(reading: GpuReading, detected: GpuInventory[], t: number): Promise<void> {
    if (!reading.ok || detected.length === 0) {
      this.probeState = { kind: 'not_run' };
      this.probeKey = '';
      return;
    }
    if (this.deps.probe === null) return;
    const key = JSON.stringify([reading.report.driverVersion, detected.map((g) => [g.uuid, g.name])]);
    const failed = this.probeState.kind === 'done' && !this.probeState.result.ok;
    const due = key !== this.probeKey || this.probeState.kind === 'not_run' || t - this.probeAt >= (failed ? this.options.probeRetryMs : this.options.probeIntervalMs);
    if (!due) return;
    if (key !== this.probeKey) this.probeState = { kind: 'not_run' };
    const result = await this.deps.probe.probe(detected.map((g) => g.uuid));
    this.probeState = { kind: 'done', result };
    this.probeKey = key;
    this.probeAt = t;
  }
}
