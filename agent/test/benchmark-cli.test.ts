import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { benchmarkResultSchema } from '@gpufarm/shared';
import { gfAgent } from './helpers/cli.js';
import { fakeNvidiaSmi } from './helpers/fake-nvidia-smi.js';

t.test('gf-agent benchmark', async (t) => {
  const stateDir = mkdtempSync(join(tmpdir(), 'gf-agent-bench-'));
  t.teardown(() => rmSync(stateDir, { recursive: true, force: true }));

  t.test('behavior: simulated mode measures the host and says the GPUs are simulated, with no invented figure', async (t) => {
    const res = await gfAgent(['benchmark', '--disk-mib', '8', '--sha-mib', '16'], { GF_AGENT_STATE_DIR: stateDir, GF_AGENT_SIMULATE_GPUS: '2x h100-80gb-sxm' });
    t.equal(res.code, 0, res.stderr);
    const result = benchmarkResultSchema.parse(JSON.parse(res.stdout));
    t.equal(result.status, 'simulated');
    t.match(result.reason, /simulated GPUs: no GPU was measured/);
    t.equal(result.tier, null);
    t.same(result.gpus, []);
    t.ok(result.host.diskWriteMBps! > 0 && result.host.sha256MBps! > 0, `host figures: ${result.host.diskWriteMBps} MB/s disk, ${result.host.sha256MBps} MB/s SHA-256`);
    t.ok(existsSync(join(stateDir, 'benchmark.json')), 'stored for hello');
  });

  t.test('behavior: GPUs that no container has seen are not benchmarked, and it says why', async (t) => {
    const smi = fakeNvidiaSmi('rtx-4090');
    t.teardown(smi.cleanup);
    const res = await gfAgent(['benchmark', '--disk-mib', '8', '--sha-mib', '16'], { PATH: smi.path, GF_AGENT_STATE_DIR: stateDir, GF_AGENT_GPU_PROBE_IMAGE: 'gpufarm/test-no-such-probe-image:1' });
    t.equal(res.code, 0, res.stderr);
    const result = benchmarkResultSchema.parse(JSON.parse(res.stdout));
    t.equal(result.status, 'not_run');
    t.match(result.reason, /benchmark container was not run: GPU container probe failed: the GPU probe image .* is not on this machine/);
    t.equal(result.tier, null);
  });
});
