import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { privateKeyToAddress, generatePrivateKey } from 'viem/accounts';
import { fakeNvidiaSmi } from '@gpufarm/agent/testing/fake-nvidia-smi';
import { enrollAgent } from './helpers/agent.js';
import { freePort } from '@gpufarm/shared/node';
import { Marketplace, ROOT } from './helpers/marketplace.js';
import { startPrometheus, type TestPrometheus } from './helpers/prometheus.js';
import { until } from './helpers/wait.js';

/**
 * A real Prometheus (Debian's) scraping a real control plane (its GF_METRICS_LISTEN) and two
 * real agents (their metrics_listen): one reading the recorded RTX 4090 through the fake
 * nvidia-smi, one simulating two L4s. PromQL answers what the fixture and the fleet say.
 */

t.setTimeout(240_000);

/** The value of the one sample `promql` gives, once Prometheus has it equal to `expected`. */
async function expectValue(prometheus: TestPrometheus, promql: string, expected: number): Promise<number> {
  let last: unknown = 'no sample';
  return until(
    async () => {
      const result = await prometheus.query(promql);
      last = result;
      return result.length === 1 && result[0]!.value === expected ? result[0]!.value : undefined;
    },
    `${promql} == ${expected}`,
    { timeoutMs: 60_000, intervalMs: 500, describe: () => JSON.stringify(last) },
  );
}

t.test('default: PromQL over a scraped control plane and agents returns the fixture, the fleet and the traffic', async (t) => {
  const cpMetrics = await freePort();
  const market = await Marketplace.start(t, { env: { GF_METRICS_LISTEN: `127.0.0.1:${cpMetrics}` } });
  const smi = fakeNvidiaSmi('rtx-4090');
  t.teardown(() => smi.cleanup());
  const payout = privateKeyToAddress(generatePrivateKey());
  const [realPort, simulatedPort] = [await freePort(), await freePort()];
  const real = await enrollAgent(market, {
    name: 'agent-4090',
    farm: 'metrics-farm',
    payout,
    env: { GF_AGENT_SIMULATE_GPUS: '', GF_AGENT_NVIDIA_SMI: join(smi.binDir, 'nvidia-smi'), GF_AGENT_METRICS_LISTEN: `127.0.0.1:${realPort}` },
  });
  const simulated = await enrollAgent(market, { name: 'agent-l4', farm: 'metrics-farm', payout, gpus: '2x l4-24gb', env: { GF_AGENT_METRICS_LISTEN: `127.0.0.1:${simulatedPort}` } });
  real.start();
  simulated.start();

  const dir = mkdtempSync(join(tmpdir(), 'gf-prometheus-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const prometheus = await startPrometheus(dir, [
    { name: 'control-plane', targets: [`127.0.0.1:${cpMetrics}`] },
    { name: 'agent', targets: [`127.0.0.1:${realPort}`, `127.0.0.1:${simulatedPort}`] },
  ]);
  t.teardown(() => prometheus.stop());

  t.equal(await expectValue(prometheus, 'up{job="control-plane"}', 1), 1, 'the control plane is scraped');
  t.equal(await expectValue(prometheus, 'sum(up{job="agent"})', 2), 2, 'both agents are scraped');
  const gpu = '{job="agent",gpu="0",uuid="GPU-a7f3c2d1-4b8e-6f09-1c2d-3e4f5a6b7c8d",class="rtx-4090-24gb"}';
  t.equal(await expectValue(prometheus, `gf_agent_gpu_temperature_celsius${gpu}`, 46), 46, "the fixture's temperature");
  t.equal(await expectValue(prometheus, `gf_agent_gpu_utilization_ratio${gpu}`, 0.12), 0.12, "the fixture's utilization as a ratio");
  t.equal(await expectValue(prometheus, `gf_agent_gpu_memory_used_bytes${gpu}`, 1843 * 1024 ** 2), 1843 * 1024 ** 2);
  t.equal(await expectValue(prometheus, `gf_agent_gpu_power_watts${gpu}`, 38.52), 38.52);
  t.equal(await expectValue(prometheus, `gf_agent_gpu_health_verdict${gpu}`, 1), 1, 'the 4090 fixture reports no GPU fault, and persistence mode off: warning');
  t.equal(await expectValue(prometheus, `gf_agent_gpu_pcie_link_width{job="agent",gpu="0",link="max"}`, 16), 16, "the fixture's PCIe width");
  t.equal(await expectValue(prometheus, 'sum(gf_agent_link_up)', 2), 2, 'both links up, as the agents see them');
  t.equal(await expectValue(prometheus, 'sum(gf_gateway_agent_links)', 2), 2, 'both links held, as the control plane sees them');
  t.equal(await expectValue(prometheus, 'sum(gf_fleet_gpus{state="idle"})', 2), 2, "the simulated machine's two GPUs are idle; the 4090 without a passed probe offers none");
  t.equal(await expectValue(prometheus, 'gf_chain_rpc_up', 1), 1, 'the chain answers');

  const before = (await prometheus.query('sum(gf_http_requests_total{route="/v1",method="GET",code="200"})'))[0]?.value ?? 0;
  for (let i = 0; i < 5; i++) t.equal((await fetch(`${market.url}/v1`)).status, 200);
  t.equal(await expectValue(prometheus, 'sum(gf_http_requests_total{route="/v1",method="GET",code="200"})', before + 5), before + 5, 'five more GET /v1 counted under the route');
  t.same(await prometheus.query('gf_http_requests_total{route=~"/v1/jobs/job_.*"}'), [], 'no raw URL is a label');

  // Every panel query of the Grafana dashboard parses and runs, with its variables as a user picks them.
  const dashboard = JSON.parse(readFileSync(join(ROOT, 'docs/grafana/gpufarm.json'), 'utf8')) as { panels: Array<{ title: string; targets?: Array<{ expr: string }> }> };
  const queries = dashboard.panels.flatMap((panel) => (panel.targets ?? []).map((target) => ({ panel: panel.title, expr: target.expr })));
  t.ok(queries.length >= 20, `${queries.length} dashboard queries`);
  const answered: string[] = [];
  for (const { panel, expr } of queries) {
    const promql = expr.replaceAll('$cp_job', 'control-plane').replaceAll('$agent_job', 'agent').replaceAll('$instance', '.*').replaceAll('$__rate_interval', '5s');
    const result = await prometheus.query(promql).then((r) => r, (err: unknown) => t.fail(`${panel}: ${promql}: ${String(err)}`));
    if (Array.isArray(result) && result.length > 0) answered.push(panel);
  }
  t.ok(answered.includes('GPU temperature') && answered.includes('Jobs by state') && answered.includes('Requests per second by route'), 'panels of both parts show data');
});
