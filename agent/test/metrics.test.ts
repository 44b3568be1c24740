import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseListenSetting } from '@gpufarm/shared';
import { startMetricsListener } from '@gpufarm/shared/node';
import t, { type Test } from 'tap';
import { loadConfig } from '../src/config/config.js';
import { nvidiaSmiReader } from '../src/inventory/gpu-reader.js';
import { systemHostReader } from '../src/inventory/host.js';
import { InventoryMonitor } from '../src/inventory/monitor.js';
import { createAgentMetrics, type AgentMetrics } from '../src/metrics/metrics.js';
import { fakeNvidiaSmi, type Fixture } from './helpers/fake-nvidia-smi.js';

/** The value of one series, or undefined when there is none. */
async function sample(metrics: AgentMetrics, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  const metric = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === name);
  return metric?.values.find((v) => Object.entries(labels).every(([k, l]) => String((v.labels as Record<string, unknown>)[k]) === l))?.value;
}

/** An inventory monitor reading the fake nvidia-smi with `fixture` (no probe: the machine is unhealthy). */
function monitorOf(t: Test, fixture: Fixture) {
  const smi = fakeNvidiaSmi(fixture);
  const dir = mkdtempSync(join(tmpdir(), 'gf-agent-metrics-'));
  t.teardown(() => {
    smi.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });
  const monitor = new InventoryMonitor(
    { gpus: nvidiaSmiReader({ command: join(smi.binDir, 'nvidia-smi') }), host: systemHostReader(dir), probe: null, now: () => new Date() },
    { agentVersion: 'test', simulate: null, hostRefreshMs: 60_000, probeIntervalMs: 60_000, probeRetryMs: 60_000 },
  );
  return { smi, monitor };
}

t.test('default: per-GPU gauges carry the last nvidia-smi reading, labelled gpu, uuid and class', async (t) => {
  const { monitor } = monitorOf(t, 'rtx-4090');
  const metrics = createAgentMetrics({ inventory: () => monitor.latest, linkUp: () => false });
  t.equal(await sample(metrics, 'gf_agent_gpus'), 0, 'nothing before the first read');
  t.equal(await sample(metrics, 'gf_agent_gpu_temperature_celsius'), undefined);
  await monitor.refresh();
  const labels = { gpu: '0', uuid: 'GPU-a7f3c2d1-4b8e-6f09-1c2d-3e4f5a6b7c8d', class: 'rtx-4090-24gb' };
  t.equal(await sample(metrics, 'gf_agent_gpu_temperature_celsius', labels), 46);
  t.equal(await sample(metrics, 'gf_agent_gpu_utilization_ratio', labels), 0.12);
  t.equal(await sample(metrics, 'gf_agent_gpu_memory_used_bytes', labels), 1843 * 1024 ** 2);
  t.equal(await sample(metrics, 'gf_agent_gpu_memory_total_bytes', labels), 24564 * 1024 ** 2);
  t.equal(await sample(metrics, 'gf_agent_gpu_power_watts', labels), 38.52);
  t.equal(await sample(metrics, 'gf_agent_gpu_power_limit_watts', labels), 450);
  t.equal(await sample(metrics, 'gf_agent_gpus'), 1);
  t.equal(await sample(metrics, 'gf_agent_healthy'), 0, 'no probe ran: not healthy');
  t.equal(await sample(metrics, 'gf_agent_link_up'), 0);
});

t.test('behavior: a GPU that disappears leaves no stale series', async (t) => {
  const { smi, monitor } = monitorOf(t, '8x-a100-sxm4-80gb');
  const metrics = createAgentMetrics({ inventory: () => monitor.latest, linkUp: () => true });
  await monitor.refresh();
  const series = async () => (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === 'gf_agent_gpu_memory_total_bytes')!.values;
  t.equal((await series()).length, 8);
  smi.use('l4');
  await monitor.refresh();
  t.same((await series()).map((v) => v.labels.class), ['l4-24gb'], 'only the GPU now present');
});

t.test('behavior: status reports count containers by outcome and uploads by count and bytes', async (t) => {
  const metrics = createAgentMetrics({ inventory: () => null, linkUp: () => true });
  const base = { imageDigest: null, startedAt: null, finishedAt: null, exitCode: null, oomKilled: null, timedOut: null, failure: null, outputs: null, record: null, lastLogSeq: null } as const;
  const output = (sizeBytes: number) => ({ path: 'result.txt', sha256: 'a'.repeat(64), sizeBytes });
  metrics.report({ ...base, state: 'pulling' });
  metrics.report({ ...base, state: 'running' });
  metrics.report({ ...base, state: 'running' });
  metrics.report({ ...base, state: 'finished', exitCode: 0, outputs: [output(100), output(20)], log: { sha256: 'b'.repeat(64), sizeBytes: 3 } });
  metrics.report({ ...base, state: 'finished', exitCode: 1, outputs: [] });
  metrics.report({ ...base, state: 'finished', exitCode: 137, timedOut: true, outputs: [] });
  metrics.report({ ...base, state: 'failed', failure: { code: 'pull_failed', message: 'no such image' } });
  t.equal(await sample(metrics, 'gf_agent_containers_started_total'), 2);
  t.equal(await sample(metrics, 'gf_agent_containers_finished_total', { outcome: 'succeeded' }), 1);
  t.equal(await sample(metrics, 'gf_agent_containers_finished_total', { outcome: 'exit_nonzero' }), 1);
  t.equal(await sample(metrics, 'gf_agent_containers_finished_total', { outcome: 'timed_out' }), 1);
  t.equal(await sample(metrics, 'gf_agent_containers_finished_total', { outcome: 'failed' }), 1);
  t.equal(await sample(metrics, 'gf_agent_uploads_total'), 3);
  t.equal(await sample(metrics, 'gf_agent_upload_bytes_total'), 123);
  t.equal(await sample(metrics, 'gf_agent_link_up'), 1);
});

t.test('args: metrics_listen is 127.0.0.1:9464 by default, off or host:port, and serves /metrics', async (t) => {
  const env = (value?: string) => ({ GF_AGENT_STATE_DIR: '/tmp/none', ...(value === undefined ? {} : { GF_AGENT_METRICS_LISTEN: value }) });
  t.equal(loadConfig({ env: env(), path: '/dev/null' }).metricsListen, '127.0.0.1:9464');
  t.equal(parseListenSetting(loadConfig({ env: env('off'), path: '/dev/null' }).metricsListen), 'off');
  t.throws(() => loadConfig({ env: env('9464'), path: '/dev/null' }), /GF_AGENT_METRICS_LISTEN: must be host:port/);
  const metrics = createAgentMetrics({ inventory: () => null, linkUp: () => false });
  const listener = await startMetricsListener(metrics.registry, { host: '127.0.0.1', port: 0 });
  t.teardown(() => listener.close());
  const res = await fetch(`${listener.url}/metrics`);
  t.equal(res.status, 200);
  t.match(await res.text(), /# TYPE gf_agent_containers_started_total counter/);
});

t.test('default: GPU health gauges carry the driver counters and the verdict, a lost GPU included', async (t) => {
  const { smi, monitor } = monitorOf(t, 'h100-80gb-hbm3-ecc-dbe');
  const metrics = createAgentMetrics({ inventory: () => monitor.latest, linkUp: () => true });
  await monitor.refresh();
  const gpu0 = { gpu: '0' };
  t.equal(await sample(metrics, 'gf_agent_gpu_health_verdict', gpu0), 2, 'an uncorrectable ECC error fails the GPU');
  t.ok((await sample(metrics, 'gf_agent_gpu_ecc_errors', { ...gpu0, type: 'uncorrectable', scope: 'volatile' }))! > 0, 'the volatile DBE count');
  t.equal(await sample(metrics, 'gf_agent_gpu_pcie_link_width', { ...gpu0, link: 'max' }), 16);

  smi.use('h100-80gb-hbm3-pcie-x8');
  await monitor.refresh();
  t.equal(await sample(metrics, 'gf_agent_gpu_pcie_link_width', { ...gpu0, link: 'current' }), 8);
  t.equal(await sample(metrics, 'gf_agent_gpu_ecc_errors', { ...gpu0, type: 'uncorrectable', scope: 'volatile' }), 0, 'the new reading replaces the old counts');

  smi.use('h100-80gb-hbm3');
  await monitor.refresh();
  t.equal(await sample(metrics, 'gf_agent_gpu_health_verdict', gpu0), 0, 'healthy');

  smi.use('8x-a100-sxm4-80gb-gpu0-lost');
  await monitor.refresh();
  t.equal(await sample(metrics, 'gf_agent_gpu_health_verdict', gpu0), 2, 'the GPU nvidia-smi lost is failed');
  t.equal(await sample(metrics, 'gf_agent_gpu_health_verdict', { gpu: '1', class: 'a100-80gb' }), 0, 'the others are healthy');
});
