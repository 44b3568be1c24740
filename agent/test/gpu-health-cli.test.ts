import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { gfAgent } from './helpers/cli.js';
import { fakeNvidiaSmi, kernelLogFixturePath } from './helpers/fake-nvidia-smi.js';
import { TestPeer } from './helpers/peer.js';
import { testCommand } from '@gpufarm/shared/build/test-bundles';

const [NODE, ...GF_AGENT] = testCommand('agent');
const TOKEN = `gfe_${'h'.repeat(43)}`;

t.test('behavior: gf-agent status prints each GPU\'s verdict with its reasons, from what the running daemon read (nvidia-smi and the kernel log)', async (t) => {
  const smi = fakeNvidiaSmi('h100-80gb-hbm3-ecc-dbe');
  t.teardown(smi.cleanup);
  const peer = await TestPeer.start({ enrollmentTokens: [TOKEN], heartbeatIntervalSeconds: 1 });
  t.teardown(() => peer.close());
  const stateDir = join(mkdtempSync(join(tmpdir(), 'gf-agent-health-')), 'state');
  t.teardown(() => rmSync(join(stateDir, '..'), { recursive: true, force: true }));
  const env = {
    GF_AGENT_STATE_DIR: stateDir,
    GF_AGENT_NVIDIA_SMI: join(smi.binDir, 'nvidia-smi'),
    GF_AGENT_KERNEL_LOG: kernelLogFixturePath('h100-xid-48.kmsg'),
    GF_AGENT_GPU_PROBE_IMAGE: 'gpufarm/test-no-such-probe-image:1',
    GF_AGENT_INVENTORY_INTERVAL_SECONDS: '1',
  };
  const enrolled = await gfAgent(['enroll', '--server', peer.url, '--token', TOKEN], env);
  t.equal(enrolled.code, 0, enrolled.stderr);

  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GF_AGENT_')));
  const child = spawn(NODE, [...GF_AGENT, 'run'], { env: { ...base, ...env }, stdio: ['ignore', 'ignore', 'ignore'] });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  await peer.waitFor(() => peer.messages('heartbeat').some((h) => h.gpuHealth?.[0]?.xids.some((x) => x.code === 48)), 'a heartbeat with XID 48');

  const status = await gfAgent(['status'], env);
  t.equal(status.code, 0, status.stderr);
  t.match(status.stdout, /^verdict: failed \(GPU container probe failed: /m, 'the machine: unhealthy (no probe image here)');
  t.match(status.stdout, /^ {2}GPU 0 GPU-2c1e6a2f-63c4-9a2b-6f56-5c1de4c7c7a0 failed: XID 48: double-bit ECC error; drain the machine and reset the GPU/m);
  t.match(status.stdout, /2 uncorrectable \(double-bit\) ECC errors since the driver loaded/);
  t.match(status.stdout, /XID 94: contained ECC error \(the job on it was stopped\)/, 'warnings follow the failures');
  const json = JSON.parse((await gfAgent(['status', '--json'], env)).stdout) as { daemon: { gpuHealth: Array<{ verdict: string }>; machineVerdict: { verdict: string } } };
  t.match(json.daemon, { gpuHealth: [{ verdict: 'failed' }], machineVerdict: { verdict: 'failed' } });

  child.kill('SIGTERM');
  t.equal(await exited, 0);
});
