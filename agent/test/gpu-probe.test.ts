import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import t from 'tap';
import { dockerGpuProbe } from '../src/inventory/gpu-probe.js';
import { gfAgent } from './helpers/cli.js';
import { fakeNvidiaSmi } from './helpers/fake-nvidia-smi.js';

/** The local test busybox image that `scripts/test-env.sh` builds and pushes (any image serves: the probe fails before it runs). */
function busyboxImage(): string {
  const path = fileURLToPath(new URL('../../.gpufarm/images.json', import.meta.url));
  if (!existsSync(path)) throw new Error(`${path} is missing: run "bash scripts/test-env.sh" (npm test does) to build the local test images`);
  const images = JSON.parse(readFileSync(path, 'utf8')) as { images: { busybox: { repository: string; tag: string } } };
  return `${images.images.busybox.repository}:${images.images.busybox.tag}`;
}

t.test('the GPU probe against the real Docker Engine of this machine (no NVIDIA runtime)', async (t) => {
  const docker = new Docker();
  const image = busyboxImage();
  const info = (await docker.info()) as { Runtimes?: Record<string, unknown> };
  const hasNvidiaRuntime = Object.keys(info.Runtimes ?? {}).includes('nvidia');
  const leftovers = async () => (await docker.listContainers({ all: true, filters: { label: ['gpufarm.probe=gpu'] } })).length;
  const before = await leftovers();

  t.test('behavior: a container cannot get the GPUs, and the reason says how to fix it', async (t) => {
    const result = await dockerGpuProbe(docker, { image }).probe(['GPU-2c1e6a2f-63c4-9a2b-6f56-5c1de4c7c7a0']);
    t.equal(result.ok, false);
    if (!result.ok) {
      t.match(result.reason, hasNvidiaRuntime ? /a container could not be started with the GPUs|nvidia-smi -L in a container exited/ : /a container could not be started with the GPUs: .*(nvidia|device driver)/i);
      // With the runtime installed (a machine lent with GPUs) the made-up UUID is what fails.
      if (!hasNvidiaRuntime) t.match(result.reason, /NVIDIA Container Toolkit/);
    }
    t.equal(await leftovers(), before, 'the probe container is removed');
  });

  t.test('error: a probe image that is not on the machine is named, never pulled', async (t) => {
    const result = await dockerGpuProbe(docker, { image: 'gpufarm/test-no-such-probe-image:1' }).probe(['GPU-x']);
    t.match(result, { ok: false, reason: /gpufarm\/test-no-such-probe-image:1 is not on this machine: run "docker pull/ });
  });

  t.test('behavior: gf-agent inventory --probe reports the GPUs it sees as not offered, with the probe failure', async (t) => {
    const smi = fakeNvidiaSmi('h100-80gb-hbm3');
    t.teardown(smi.cleanup);
    const stateDir = mkdtempSync(join(tmpdir(), 'gf-agent-probe-'));
    t.teardown(() => rmSync(stateDir, { recursive: true, force: true }));
    const res = await gfAgent(['inventory', '--probe'], { PATH: smi.path, GF_AGENT_STATE_DIR: stateDir, GF_AGENT_GPU_PROBE_IMAGE: image });
    t.equal(res.code, 0, res.stderr);
    const inv = JSON.parse(res.stdout) as { offered: boolean; gpus: unknown[]; health: { status: string; gpuProbe: string; reason: string } };
    t.equal(inv.gpus.length, 1, 'the GPU nvidia-smi lists is shown locally');
    t.equal(inv.offered, false);
    t.match(inv.health, { status: 'unhealthy', gpuProbe: 'failed', reason: /GPU container probe failed: / });
    const wire = await gfAgent(['inventory', '--probe', '--wire'], { PATH: smi.path, GF_AGENT_STATE_DIR: stateDir, GF_AGENT_GPU_PROBE_IMAGE: image });
    const sent = JSON.parse(wire.stdout) as { gpus: unknown[]; detectedGpuCount: number };
    t.same(sent.gpus, [], 'the control plane is told no GPU');
    t.equal(sent.detectedGpuCount, 1);
  });
});
