import { gpuHealthVerdict, type GpuHealthReport } from '@gpufarm/shared';
import { EVENT_LOOP_SAMPLE_MS } from '@gpufarm/shared/node';
import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import type { InventorySnapshot } from '../inventory/snapshot.js';
import type { AssignmentReport } from '../link/assignment-runner.js';

/** Names start with this, in the manner of dcgm-exporter's `DCGM_FI_DEV_*` but by Prometheus conventions. */
export const AGENT_METRIC_PREFIX = 'gf_agent_';

/** The per-GPU labels: index, UUID and catalog class (`unknown` for a model outside the catalog). */
export const GPU_LABELS = ['gpu', 'uuid', 'class'] as const;
type GpuLabel = (typeof GPU_LABELS)[number];
export type GpuLabels = Record<GpuLabel, string>;

export interface AgentMetricsSources {
  /** The latest inventory (GPU figures of the last nvidia-smi read); null before the first. */
  inventory: () => InventorySnapshot | null;
  /** Whether the control plane link is up (welcomed). */
  linkUp: () => boolean;
}

/** How an assignment ended, for `gf_agent_containers_finished_total{outcome}` (a closed set). */
export type ContainerOutcome = 'succeeded' | 'exit_nonzero' | 'timed_out' | 'oom_killed' | 'failed';

/**
 * The agent's metrics in a registry of its own: per-GPU gauges read from the latest inventory
 * at scrape time, container and upload counters fed by the assignments' reports, the link.
 */
export interface AgentMetrics {
  registry: Registry;
  /** Counts what an assignment's status report says: a container started, ended, uploads made. */
  report(status: AssignmentReport): void;
}

/** A fresh registry with every agent metric, reading `sources` at each scrape; `gf-agent run` makes one. */
export function createAgentMetrics(sources: AgentMetricsSources): AgentMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: AGENT_METRIC_PREFIX, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  const registers = [registry];
  new Gauge({
    name: `${AGENT_METRIC_PREFIX}gpus`,
    help: 'GPUs the last inventory read detected.',
    registers,
    collect() {
      const snapshot = sources.inventory();
      // Registered before the per-GPU gauges, so a scrape sets their series before reading them;
      // each scrape sets every series again: a GPU gone from the machine leaves no stale series.
      for (const gauge of Object.values(gpu)) gauge.reset();
      resetGpuHealth();
      if (!snapshot) return;
      this.set(snapshot.detected.length);
      for (const reading of snapshot.detected) {
        const labels: GpuLabels = { gpu: String(reading.index), uuid: reading.uuid, class: reading.classId ?? 'unknown' };
        setIfKnown(gpu.utilization, labels, reading.utilizationPercent === null ? null : reading.utilizationPercent / 100);
        setIfKnown(gpu.memoryUsed, labels, reading.memoryUsedBytes);
        setIfKnown(gpu.memoryTotal, labels, reading.vramBytes);
        setIfKnown(gpu.temperature, labels, reading.temperatureC);
        setIfKnown(gpu.power, labels, reading.powerDrawWatts);
        setIfKnown(gpu.powerLimit, labels, reading.powerLimitWatts);
      }
      // From the health reports, not the readings: a GPU nvidia-smi lost has a report (failed) but no reading.
      for (const report of snapshot.gpuHealth) {
        const classId = snapshot.detected.find((g) => g.index === report.index)?.classId;
        recordGpuHealth(report, { gpu: String(report.index), uuid: report.uuid ?? 'unknown', class: classId ?? 'unknown' });
      }
    },
  });
  const { record: recordGpuHealth, reset: resetGpuHealth } = gpuHealthGauges(registers);
  const gpuGauge = (name: string, help: string) => new Gauge({ name: `${AGENT_METRIC_PREFIX}${name}`, help, labelNames: GPU_LABELS, registers });
  const gpu = {
    utilization: gpuGauge('gpu_utilization_ratio', 'GPU utilization as a ratio (0 to 1), from nvidia-smi.'),
    memoryUsed: gpuGauge('gpu_memory_used_bytes', 'GPU framebuffer memory in use.'),
    memoryTotal: gpuGauge('gpu_memory_total_bytes', 'GPU framebuffer memory.'),
    temperature: gpuGauge('gpu_temperature_celsius', 'GPU core temperature.'),
    power: gpuGauge('gpu_power_watts', 'GPU power draw.'),
    powerLimit: gpuGauge('gpu_power_limit_watts', 'GPU enforced power limit.'),
  };
  new Gauge({
    name: `${AGENT_METRIC_PREFIX}healthy`,
    help: '1 when the agent judges the machine healthy (GPUs seen by nvidia-smi and the container probe).',
    registers,
    collect() {
      const snapshot = sources.inventory();
      if (snapshot) this.set(snapshot.health.status === 'healthy' ? 1 : 0);
    },
  });
  new Gauge({
    name: `${AGENT_METRIC_PREFIX}link_up`,
    help: '1 while the link to the control plane is up.',
    registers,
    collect() {
      this.set(sources.linkUp() ? 1 : 0);
    },
  });
  const started = new Counter({ name: `${AGENT_METRIC_PREFIX}containers_started_total`, help: 'Job containers started.', registers });
  const finished = new Counter({
    name: `${AGENT_METRIC_PREFIX}containers_finished_total`,
    help: 'Assignments ended, by outcome: succeeded, exit_nonzero, timed_out, oom_killed, failed (an infrastructure fault).',
    labelNames: ['outcome'],
    registers,
  });
  const uploads = new Counter({ name: `${AGENT_METRIC_PREFIX}uploads_total`, help: 'Artifacts uploaded to the control plane (outputs and job logs).', registers });
  const uploadBytes = new Counter({ name: `${AGENT_METRIC_PREFIX}upload_bytes_total`, help: 'Bytes of artifacts uploaded to the control plane.', registers });

  return {
    registry,
    report(status) {
      if (status.state === 'running') started.inc();
      if (status.state === 'failed') finished.inc({ outcome: 'failed' });
      if (status.state !== 'finished') return;
      finished.inc({ outcome: outcomeOf(status) });
      const artifacts = [...(status.outputs ?? []), ...(status.log ? [status.log] : [])];
      uploads.inc(artifacts.length);
      uploadBytes.inc(artifacts.reduce((sum, a) => sum + a.sizeBytes, 0));
    },
  };
}

function outcomeOf(status: AssignmentReport): ContainerOutcome {
  if (status.timedOut) return 'timed_out';
  if (status.oomKilled) return 'oom_killed';
  return status.exitCode === 0 ? 'succeeded' : 'exit_nonzero';
}

function setIfKnown(gauge: Gauge<GpuLabel>, labels: GpuLabels, value: number | null): void {
  // nvidia-smi's `N/A` is no reading: no sample rather than a misleading 0.
  if (value !== null) gauge.set(labels, value);
}

/** A verdict as a number, so alerts can compare: 0 healthy, 1 warning, 2 failed. */
const VERDICT_VALUE = { healthy: 0, warning: 1, failed: 2 } as const;

const flagValue = (flag: boolean | null): number | null => (flag === null ? null : flag ? 1 : 0);

/**
 * The GPU health gauges from each GPU's health report (the driver's counters and the kernel
 * log's XIDs), with the per-GPU labels plus a closed set of their own (`type`, `scope`,
 * `reason`). Counts the driver does not report (ECC on a consumer card) give no sample.
 */
export function gpuHealthGauges(registers: Registry[]): { record: (report: GpuHealthReport, labels: GpuLabels) => void; reset: () => void } {
  const gauge = <L extends string>(name: string, help: string, extra: readonly L[] = []) =>
    new Gauge<GpuLabel | L>({ name: `${AGENT_METRIC_PREFIX}${name}`, help, labelNames: [...GPU_LABELS, ...extra], registers });
  const g = {
    verdict: gauge('gpu_health_verdict', 'The GPU health verdict: 0 healthy, 1 warning (still offered), 2 failed (not offered).'),
    xidErrors: gauge('gpu_xid_errors', 'XID errors the kernel log reported for the GPU since the agent started.'),
    lastXid: gauge('gpu_last_xid', 'The code of the most recent XID error of the GPU (no sample before the first).'),
    ecc: gauge('gpu_ecc_errors', 'ECC errors by type (correctable, uncorrectable) and scope (volatile: since the driver loaded; aggregate: lifetime).', ['type', 'scope'] as const),
    retiredPages: gauge('gpu_retired_pages', 'Framebuffer pages retired, by cause (single_bit, double_bit).', ['cause'] as const),
    retiredPending: gauge('gpu_retired_pages_pending', '1 when a page retirement waits for a GPU reset.'),
    remappedRows: gauge('gpu_remapped_rows', 'Memory rows remapped, by type (correctable, uncorrectable).', ['type'] as const),
    remapPending: gauge('gpu_remapped_rows_pending', '1 when a row remapping waits for a GPU reset.'),
    remapFailure: gauge('gpu_remapped_rows_failure', '1 when a row remapping failed (the GPU should be replaced).'),
    clockEvent: gauge('gpu_clock_event_active', '1 while a clock event (throttle) reason is active: hw_slowdown, hw_thermal_slowdown, hw_power_brake_slowdown, sw_thermal_slowdown, sw_power_cap.', ['reason'] as const),
    slowdownTemp: gauge('gpu_slowdown_temperature_celsius', 'The temperature at which the GPU slows itself down.'),
    pcieGen: gauge('gpu_pcie_link_generation', 'PCIe link generation, current and max.', ['link'] as const),
    pcieWidth: gauge('gpu_pcie_link_width', 'PCIe link width (lanes), current and max.', ['link'] as const),
  };
  const set = <L extends string>(target: Gauge<L>, labels: Record<L, string>, value: number | null) => {
    if (value !== null) target.set(labels, value);
  };
  return {
    reset: () => {
      for (const item of Object.values(g)) item.reset();
    },
    record: (report, labels) => {
      set(g.verdict, labels, VERDICT_VALUE[gpuHealthVerdict(report, new Date()).verdict]);
      set(g.xidErrors, labels, report.xids.reduce((sum, x) => sum + x.count, 0));
      const last = report.xids.reduce<GpuHealthReport['xids'][number] | null>((latest, x) => (latest === null || x.lastAt > latest.lastAt ? x : latest), null);
      if (last) set(g.lastXid, labels, last.code);
      const { ecc, retiredPages, remappedRows, clockEvents, pcie } = report;
      set(g.ecc, { ...labels, type: 'correctable', scope: 'volatile' }, ecc.volatileCorrectable);
      set(g.ecc, { ...labels, type: 'uncorrectable', scope: 'volatile' }, ecc.volatileUncorrectable);
      set(g.ecc, { ...labels, type: 'correctable', scope: 'aggregate' }, ecc.aggregateCorrectable);
      set(g.ecc, { ...labels, type: 'uncorrectable', scope: 'aggregate' }, ecc.aggregateUncorrectable);
      set(g.retiredPages, { ...labels, cause: 'single_bit' }, retiredPages.singleBit);
      set(g.retiredPages, { ...labels, cause: 'double_bit' }, retiredPages.doubleBit);
      set(g.retiredPending, labels, flagValue(retiredPages.pending));
      set(g.remappedRows, { ...labels, type: 'correctable' }, remappedRows.correctable);
      set(g.remappedRows, { ...labels, type: 'uncorrectable' }, remappedRows.uncorrectable);
      set(g.remapPending, labels, flagValue(remappedRows.pending));
      set(g.remapFailure, labels, flagValue(remappedRows.failure));
      set(g.clockEvent, { ...labels, reason: 'hw_slowdown' }, flagValue(clockEvents.hwSlowdown));
      set(g.clockEvent, { ...labels, reason: 'hw_thermal_slowdown' }, flagValue(clockEvents.hwThermalSlowdown));
      set(g.clockEvent, { ...labels, reason: 'hw_power_brake_slowdown' }, flagValue(clockEvents.hwPowerBrakeSlowdown));
      set(g.clockEvent, { ...labels, reason: 'sw_thermal_slowdown' }, flagValue(clockEvents.swThermalSlowdown));
      set(g.clockEvent, { ...labels, reason: 'sw_power_cap' }, flagValue(clockEvents.swPowerCap));
      set(g.slowdownTemp, labels, report.slowdownTempC);
      set(g.pcieGen, { ...labels, link: 'current' }, pcie.currentGen);
      set(g.pcieGen, { ...labels, link: 'max' }, pcie.maxGen);
      set(g.pcieWidth, { ...labels, link: 'current' }, pcie.currentWidth);
      set(g.pcieWidth, { ...labels, link: 'max' }, pcie.maxWidth);
    },
  };
}
