import type { GpuInventory, HostInventory } from '@gpufarm/shared';
import type { GpuProbe } from './gpu-probe.js';
import type { GpuReader, GpuReading } from './gpu-reader.js';
import { simulatedGpus, type SimulatedGpuSpec } from './simulated.js';
import { decideHealth, gpuHealthReports, gpusFromReading, type InventorySnapshot, type KnownGpu, type ProbeState } from './snapshot.js';
import type { KernelLogWatcher } from './kernel-log.js';
import { normalizePciBusId } from './nvidia-smi-xml.js';
import type { HostReader } from './host.js';
import type { DriverHostFacts, DriverHostReader } from './driver-host.js';
import { preOfferChecks } from './pre-offer.js';

export interface InventoryDeps {
  gpus: GpuReader;
  host: HostReader;
  /** Null: the probe is never run (the machine stays unhealthy unless simulated). */
  probe: GpuProbe | null;
  /** The kernel log's XIDs; null: none are read. */
  kernelLog?: KernelLogWatcher | null;
  /** The driver's host facts for the pre-offer checks (`driver-host.ts`); null: none are read. */
  driverHost?: DriverHostReader | null;
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
 * Keeps the machine's inventory current: `refresh()` re-reads the GPUs (nvidia-smi), the
 * driver's host facts (pre-offer checks), the host facts when stale, and runs the container
 * probe when the GPU set or driver changed, when the last probe failed (after `probeRetryMs`),
 * when the last pass is older than `probeIntervalMs`, or `probeRetryMs` after a job's container
 * lost its GPUs (`containerGpuLost`).
 */
export class InventoryMonitor {
  private host: { value: HostInventory; at: number } | null = null;
  private probeState: ProbeState = { kind: 'not_run' };
  private probeKey = '';
  private probeAt = 0;
  private last: InventorySnapshot | null = null;
  /** Every GPU read since start, by normalized PCI bus id: a lost GPU keeps its UUID and index. */
  private readonly known = new Map<string, KnownGpu>();
  /** The last reading and host facts, for a health decided again between refreshes. */
  private lastReading: GpuReading | null = null;
  private lastHost: DriverHostFacts | null = null;
  /** A running job's container lost its GPUs (reason with its fix): unhealthy until a probe after it passes. */
  private containerGpuLoss: { reason: string; at: number } | null = null;

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
    let driver: DriverHostFacts | null = null;
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
      driver = (await this.deps.driverHost?.read({ fabricAttached: reading.ok && reading.report.gpus.some((g) => g.health.fabric !== null) })) ?? null;
      await this.maybeProbe(reading, detected, t);
    }
    this.lastReading = reading;
    this.lastHost = driver;
    const driverVersion = reading?.ok ? reading.report.driverVersion : null;
    const cudaVersion = reading?.ok ? reading.report.cudaVersion : null;
    const snapshot: InventorySnapshot = {
      agentVersion: this.options.agentVersion,
      simulated: this.options.simulate !== null,
      host: this.host.value,
      detected,
      driverVersion,
      cudaVersion,
      health: this.health(),
      gpuHealth: gpuHealthReports(reading, this.deps.kernelLog ?? null, this.known),
      kernelLogProblem: this.deps.kernelLog?.problem ?? null,
      preOffer: this.options.simulate ? [] : preOfferChecks(reading, driver),
      collectedAt: now.toISOString(),
    };
    this.last = snapshot;
    return snapshot;
  }

  /**
   * A running job's container lost its GPUs (`runtime/gpu-access.ts`; `reason` carries the fix):
   * the machine is unhealthy from now on, in the latest snapshot too, until a probe run
   * `probeRetryMs` later passes.
   */
  containerGpuLost(reason: string): void {
    this.containerGpuLoss = { reason, at: this.deps.now().getTime() };
    if (this.last !== null) this.last = { ...this.last, health: this.health() };
  }

  private health() {
    return decideHealth({
      simulated: this.options.simulate !== null,
      reading: this.lastReading,
      probe: this.probeState,
      host: this.lastHost,
      containerGpuLoss: this.containerGpuLoss?.reason ?? null,
      now: this.deps.now(),
    });
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
    const loss = this.containerGpuLoss;
    // After a loss, only a probe at least `probeRetryMs` later counts: the operator sees the
    // machine unhealthy for that long, and a fresh container proves the GPUs again.
    const due = loss !== null
      ? t - loss.at >= this.options.probeRetryMs
      : key !== this.probeKey || this.probeState.kind === 'not_run' || t - this.probeAt >= (failed ? this.options.probeRetryMs : this.options.probeIntervalMs);
    if (!due) return;
    if (key !== this.probeKey) this.probeState = { kind: 'not_run' };
    const result = await this.deps.probe.probe(detected.map((g) => g.uuid));
    this.probeState = { kind: 'done', result };
    this.probeKey = key;
    this.probeAt = t;
    this.containerGpuLoss = null;
  }
}
