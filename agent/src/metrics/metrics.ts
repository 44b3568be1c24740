import type { GpuInventory } from '@gpufarm/shared';
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
  collectDefaultMetrics({ register: registry, prefix: AGENT_METRIC_PREFIX });
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
        recordGpuHealth(reading, labels);
      }
    },
  });
  const recordGpuHealth = gpuHealthGauges(registers);
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

/**
 * GPU HEALTH GAUGES GO HERE: XID error count, ECC volatile/aggregate errors and remapped rows
 * (pending, failures), per GPU with the same `labels`, once the inventory's reading carries them
 * (such as `gf_agent_gpu_xid_errors`, `gf_agent_gpu_ecc_errors{type,scope}`,
 * `gf_agent_gpu_remapped_rows{state}`). Registers its gauges in `registers` once; the recorder
 * it returns is called for every GPU on every scrape, after the per-GPU series were reset.
 */
export function gpuHealthGauges(_registers: Registry[]): (reading: GpuInventory, labels: GpuLabels) => void {
  return () => {};
}
