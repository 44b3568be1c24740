import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import Docker from 'dockerode';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { gfAgent } from './helpers/cli.js';
import { fakeHostRoot, fakeSystemctl } from './helpers/fake-driver-host.js';
import { fakeNvidiaSmi, machineXml } from './helpers/fake-nvidia-smi.js';
import { TestPeer } from './helpers/peer.js';

interface Check {
  name: string;
  status: string;
  detail: string;
  fix: string | null;
}

/** PATH without any nvidia-smi: this machine has no GPU (the fake is not on it). */
const noGpuPath = process.env.PATH ?? '/usr/bin:/bin';

t.test('gf-agent doctor on this machine (Docker Engine, no GPU, no NVIDIA runtime)', async (t) => {
  // A machine lent with GPUs has the NVIDIA runtime: then that check passes.
  const info = (await new Docker().info()) as { Runtimes?: Record<string, unknown> };
  const hasNvidiaRuntime = Object.keys(info.Runtimes ?? {}).includes('nvidia');
  const peer = await TestPeer.start();
  t.teardown(() => peer.close());
  const stateDir = mkdtempSync(join(tmpdir(), 'gf-agent-doctor-'));
  t.teardown(() => rmSync(stateDir, { recursive: true, force: true }));

  t.test('default: says what is missing and how to fix it', async (t) => {
    const res = await gfAgent(['doctor'], { PATH: noGpuPath, GF_AGENT_STATE_DIR: stateDir, GF_AGENT_SERVER: peer.url, GF_AGENT_NVIDIA_SMI: 'nvidia-smi-not-installed' });
    t.equal(res.code, 1, 'a failed check makes the exit code 1');
    t.match(res.stdout, /\[ok {2}\] docker socket +Docker Engine answers/);
    t.match(res.stdout, /\[ok {2}\] docker api version +Engine .*API 1\.\d+/);
    t.match(res.stdout, /\[FAIL\] nvidia-smi +nvidia-smi-not-installed was not found on PATH/);
    t.match(res.stdout, /fix: install the NVIDIA driver/);
    if (hasNvidiaRuntime) {
      t.match(res.stdout, /\[ok {2}\] nvidia container runtime +Docker lists the "nvidia" runtime/);
    } else {
      t.match(res.stdout, /\[FAIL\] nvidia container runtime +Docker has no "nvidia" runtime/);
      t.match(res.stdout, /fix: install the NVIDIA Container Toolkit/);
    }
    t.match(res.stdout, /\[(ok {2}|WARN)\] free disk/);
    t.match(res.stdout, /\[ok {2}\] control plane +http:\/\/127\.0\.0\.1:\d+\/v1 answered HTTP 200/);
    t.match(res.stdout, /\[ok {2}\] clock skew +local clock within/);
    t.match(res.stdout, hasNvidiaRuntime ? /1 check\(s\) failed/ : /2 check\(s\) failed/);
  });

  t.test('behavior: an unreachable control plane and a missing socket are named with their fixes', async (t) => {
    // A port that was free a moment ago: nothing listens there.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const res = await gfAgent(['doctor', '--json'], { PATH: noGpuPath, GF_AGENT_STATE_DIR: stateDir, GF_AGENT_SERVER: `http://127.0.0.1:${port}`, DOCKER_HOST: `unix://${join(stateDir, 'no-docker.sock')}` });
    const checks = JSON.parse(res.stdout) as Check[];
    const by = (name: string) => checks.find((c) => c.name === name)!;
    t.equal(by('docker socket').status, 'fail');
    t.match(by('docker socket').detail, /no socket at/);
    t.match(by('docker socket').fix, /apt-get install -y docker\.io/);
    t.equal(by('control plane').status, 'fail');
    t.match(by('control plane').detail, /cannot be reached: ECONNREFUSED/);
    t.match(by('control plane').fix, /firewall/);
  });

  t.test('behavior: with a GPU visible to nvidia-smi, the driver passes and the runtime is still missing', async (t) => {
    const smi = fakeNvidiaSmi('8x-a100-sxm4-80gb');
    t.teardown(smi.cleanup);
    const res = await gfAgent(['doctor', '--json'], { PATH: smi.path, GF_AGENT_STATE_DIR: stateDir });
    const checks = JSON.parse(res.stdout) as Check[];
    const by = (name: string) => checks.find((c) => c.name === name)!;
    t.equal(by('nvidia-smi').status, 'ok');
    t.match(by('nvidia-smi').detail, /8 GPU\(s\): NVIDIA A100-SXM4-80GB; driver 525\.85\.12, CUDA 12\.0/);
    t.same([by('gpu support').status, by('gpu support').detail], ['ok', `8 GPU(s) offered: ${[...Array(8).keys()].map((i) => `GPU ${i} as a100-80gb`).join(', ')}`]);
    t.equal(by('nvidia container runtime').status, hasNvidiaRuntime ? 'ok' : 'fail');
    t.equal(by('control plane').status, 'skip');
    t.match(by('control plane').fix, /gf-agent enroll/);
  });

  t.test('behavior: a GPU older than compute capability 7.5 is named with why it is not offered', async (t) => {
    const smi = fakeNvidiaSmi('gtx-1080-ti');
    t.teardown(smi.cleanup);
    const only = JSON.parse((await gfAgent(['doctor', '--json'], { PATH: smi.path, GF_AGENT_STATE_DIR: stateDir })).stdout) as Check[];
    const support = only.find((c) => c.name === 'gpu support')!;
    t.equal(support.status, 'fail', 'nothing to offer');
    t.equal(support.detail, 'no GPU is offered: GPU 0 (NVIDIA GeForce GTX 1080 Ti) is not offered: compute capability 6.1 (Pascal) is older than 7.5 (Turing), the oldest offered: CUDA 13 and the benchmark do not support it');
    t.match(support.fix, /compute capability 7\.5 \(Turing\) or newer are offered/);

    const card = (name: string, memoryMiB: number, pciDeviceId: string, architecture: string) => ({ name, memoryMiB, pciDeviceId, architecture, computeCap: null });
    smi.useXml(machineXml('gtx-1080-ti', [card('NVIDIA GeForce RTX 3060', 12288, '0x250410DE', 'Ampere'), card('NVIDIA GeForce GTX 1080 Ti', 11264, '0x1B0610DE', 'Pascal')]), null);
    const mixed = JSON.parse((await gfAgent(['doctor', '--json'], { PATH: smi.path, GF_AGENT_STATE_DIR: stateDir })).stdout) as Check[];
    t.match(mixed.find((c) => c.name === 'gpu support'), { status: 'warn', detail: /^GPU 0 as rtx-3060-12gb offered; GPU 1 \(NVIDIA GeForce GTX 1080 Ti\) is not offered: compute capability 6\.1 \(Pascal\)/ }, 'by its device id where the driver has no compute_cap field');
  });

  t.test('behavior: the pre-offer checks: a driver/library mismatch and a fabric manager that is not running fail with their fixes, persistence mode off warns', async (t) => {
    const smi = fakeNvidiaSmi('8x-h100-sxm5');
    t.teardown(smi.cleanup);
    const systemctl = fakeSystemctl({ 'nvidia-fabricmanager.service': 'inactive' });
    t.teardown(systemctl.cleanup);
    // The driver was upgraded to 570.124.06; the 570.86.15 kernel module is still loaded.
    const host = fakeHostRoot({ procVersion: 'proc-driver-nvidia-version-570.86.15-open', nvmlLibraries: ['570.124.06'], systemd: true });
    t.teardown(host.cleanup);
    const env = { PATH: systemctl.path(smi.binDir), GF_AGENT_STATE_DIR: stateDir, GF_AGENT_HOST_ROOT: host.root };
    const doctor = async () => {
      const checks = JSON.parse((await gfAgent(['doctor', '--json'], env)).stdout) as Check[];
      return (name: string) => checks.find((c) => c.name === name)!;
    };
    smi.fail('driver-library-mismatch-570');
    let by = await doctor();
    t.match(by('nvidia-smi'), { status: 'fail', detail: /Failed to initialize NVML: Driver\/library version mismatch/ });
    t.match(by('driver libraries'), { status: 'fail', detail: /^the NVIDIA kernel module \(570\.86\.15\) and the user-space libraries \(570\.124\) are of different driver versions/, fix: /^reboot, or reload the nvidia kernel modules/ });

    // Rebooted into 570.124 (as far as nvidia-smi goes); the fabric was set up, but systemd says its manager is not running.
    smi.use('8x-h100-sxm5');
    by = await doctor();
    t.match(by('fabric manager'), { status: 'fail', detail: /^an NVSwitch system \(8 GPU\(s\) with a fabric\): the nvidia-fabricmanager\.service service is inactive$/, fix: /`systemctl enable --now nvidia-fabricmanager`/ });
    t.equal(by('persistence mode').status, 'ok');
    systemctl.set('nvidia-fabricmanager.service', 'active');
    t.equal((await doctor())('fabric manager').status, 'ok');

    smi.use('rtx-4090');
    const res = await gfAgent(['doctor'], env);
    t.match(res.stdout, /\[WARN\] persistence mode +GPU 0: persistence mode is off: /);
    t.match(res.stdout, /fix: enable persistence mode: `nvidia-smi -pm 1` \(until the next reboot\) or `systemctl enable --now nvidia-persistenced`/);
    t.match(res.stdout, /\[skip\] fabric manager +not an NVSwitch system/);
  });

  t.test('behavior: simulated mode does not need the driver or the runtime', async (t) => {
    const res = await gfAgent(['doctor', '--json'], { PATH: noGpuPath, GF_AGENT_STATE_DIR: stateDir, GF_AGENT_SIMULATE_GPUS: '1x l4-24gb', GF_AGENT_NVIDIA_SMI: 'nvidia-smi-not-installed' });
    const checks = JSON.parse(res.stdout) as Check[];
    t.equal(checks.find((c) => c.name === 'nvidia-smi')!.status, 'skip');
    t.equal(checks.find((c) => c.name === 'nvidia container runtime')!.status, 'skip');
  });
});
