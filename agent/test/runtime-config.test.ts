import t from 'tap';
import type { AssignmentSpec } from '@gpufarm/shared';
import {
  ContainerConfigError,
  DEFAULT_CPU_CORES_PER_GPU,
  DEFAULT_PIDS_LIMIT,
  DEFAULT_RAM_BYTES_PER_GPU,
  DEFAULT_RAM_BYTES_WITHOUT_GPU,
  KEPT_CAPABILITIES,
  checkContainerConfig,
  toContainerConfig,
  type MachineFacts,
} from '../src/runtime/container-config.js';

const machine: MachineFacts = { simulated: false, cpuCores: 64, ramBytes: 512 * 1024 ** 3 };
const placement = {
  name: 'gf-m1-asg_1',
  image: `127.0.0.1:5000/gpufarm/canary@sha256:${'a'.repeat(64)}`,
  labels: { 'org.gpufarm.assignment': 'asg_1' },
  inputs: [{ mountName: 'data.bin', hostPath: '/var/lib/gf/asg_1/inputs/data.bin' }],
  outputHostPath: '/var/lib/gf/asg_1/output',
  imageUser: '',
};
function spec(overrides: Partial<AssignmentSpec> = {}): AssignmentSpec {
  return {
    assignmentId: 'asg_1',
    jobId: 'job_1',
    image: '127.0.0.1:5000/gpufarm/canary',
    imageDigest: `sha256:${'a'.repeat(64)}`,
    command: ['sha256-chain', '1000'],
    env: { EPOCHS: '3' },
    gpus: [
      { index: 0, uuid: 'GPU-aaaa' },
      { index: 3, uuid: 'GPU-dddd' },
    ],
    cpuCores: null,
    ramBytes: null,
    maxRuntimeSeconds: 600,
    networkPolicy: { mode: 'none' },
    inputs: [],
    outputRules: [{ path: '/output', maxBytes: 1024 }],
    ...overrides,
  };
}

t.test('default', async (t) => {
  const c = toContainerConfig(spec(), machine, placement);
  const h = c.HostConfig!;
  t.equal(c.Image, placement.image);
  t.same(c.Entrypoint, ['sha256-chain'], 'command[0] replaces the entrypoint');
  t.same(c.Cmd, ['1000'], 'the rest are its arguments');
  t.same(c.Env, ['EPOCHS=3', 'GF_JOB_ID=job_1']);
  t.same(c.Labels, placement.labels);
  t.equal(c.Tty, false);
  t.equal(h.Privileged, false);
  t.equal(c.User, '65534:65534', 'an image without USER runs as 65534');
  t.same(h.CapDrop, ['ALL']);
  t.same(h.CapAdd, ['KILL', 'NET_BIND_SERVICE']);
  t.same(h.CapAdd, [...KEPT_CAPABILITIES]);
  const never = ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'SETUID', 'SETGID', 'SETPCAP', 'SETFCAP', 'SYS_ADMIN', 'NET_ADMIN', 'NET_RAW', 'SYS_PTRACE', 'MKNOD', 'SYS_MODULE'];
  t.notOk(h.CapAdd!.some((cap: string) => never.includes(cap)), 'none of the ownership, permission, identity or host capabilities');
  t.same(h.SecurityOpt, ['no-new-privileges']);
  t.equal(h.NetworkMode, 'none');
  t.equal(h.Init, true);
  t.equal(h.ReadonlyRootfs, true);
  t.match(h.Tmpfs!['/tmp'], /size=\d+/);
  t.equal(h.PidsLimit, DEFAULT_PIDS_LIMIT);
  t.equal(h.Memory, 2 * DEFAULT_RAM_BYTES_PER_GPU);
  t.equal(h.MemorySwap, h.Memory, 'no swap');
  t.equal(h.NanoCpus, 2 * DEFAULT_CPU_CORES_PER_GPU * 1e9);
  t.same(h.DeviceRequests, [{ Driver: 'nvidia', DeviceIDs: ['GPU-aaaa', 'GPU-dddd'], Capabilities: [['gpu']] }]);
  t.same(h.Mounts, [
    { Type: 'bind', Source: '/var/lib/gf/asg_1/inputs/data.bin', Target: '/input/data.bin', ReadOnly: true },
    { Type: 'bind', Source: '/var/lib/gf/asg_1/output', Target: '/output', ReadOnly: false },
  ]);
  t.notOk(JSON.stringify(c).includes('docker.sock'), 'no Docker socket anywhere');
  t.not(h.PidMode, 'host');
  t.not(h.IpcMode, 'host');
  t.notOk(h.Binds, 'no binds besides the mounts');
  t.notOk(h.Devices, 'no devices');
});

t.test("args: the image's USER is used as it is, root included", async (t) => {
  t.equal(toContainerConfig(spec(), machine, { ...placement, imageUser: 'worker' }).User, 'worker');
  t.equal(toContainerConfig(spec(), machine, { ...placement, imageUser: '1000:100' }).User, '1000:100');
  const root = toContainerConfig(spec(), machine, { ...placement, imageUser: 'root' });
  t.equal(root.User, 'root');
  t.same(root.HostConfig!.CapAdd, [...KEPT_CAPABILITIES], 'root keeps no more capabilities than any user');
  t.equal(toContainerConfig(spec(), machine, { ...placement, imageUser: '  ' }).User, '65534:65534', 'a blank USER names none');
});

t.test('args: simulated GPUs get no DeviceRequests', async (t) => {
  const c = toContainerConfig(spec(), { ...machine, simulated: true }, placement);
  t.notOk(c.HostConfig!.DeviceRequests);
});

t.test('args: explicit limits, no GPUs and the defaults without GPUs', async (t) => {
  const c = toContainerConfig(spec({ gpus: [], cpuCores: 3, ramBytes: 1234567890 }), { ...machine, pidsLimit: 64 }, placement);
  t.equal(c.HostConfig!.NanoCpus, 3e9);
  t.equal(c.HostConfig!.Memory, 1234567890);
  t.equal(c.HostConfig!.PidsLimit, 64);
  t.notOk(c.HostConfig!.DeviceRequests);
  const d = toContainerConfig(spec({ gpus: [] }), machine, placement);
  t.equal(d.HostConfig!.Memory, DEFAULT_RAM_BYTES_WITHOUT_GPU);
  t.equal(d.HostConfig!.NanoCpus, 1e9);
});

t.test('args: defaults are clamped to what the machine offers', async (t) => {
  const small: MachineFacts = { simulated: true, cpuCores: 4, ramBytes: 16 * 1024 ** 3 };
  const c = toContainerConfig(spec(), small, placement);
  t.equal(c.HostConfig!.Memory, small.ramBytes);
  t.equal(c.HostConfig!.NanoCpus, 4e9);
});

t.test('args: an empty command keeps the image entrypoint and command', async (t) => {
  const c = toContainerConfig(spec({ command: [] }), machine, placement);
  t.notOk('Cmd' in c);
  t.notOk('Entrypoint' in c);
});

t.test('args: a deterministic job gets GF_DETERMINISTIC=1; other jobs get no such variable', async (t) => {
  t.same(toContainerConfig(spec({ deterministic: true }), machine, placement).Env, ['EPOCHS=3', 'GF_JOB_ID=job_1', 'GF_DETERMINISTIC=1']);
  t.same(toContainerConfig(spec({ deterministic: false }), machine, placement).Env, ['EPOCHS=3', 'GF_JOB_ID=job_1']);
  t.throws(() => toContainerConfig(spec({ env: { GF_DETERMINISTIC: '1' } }), machine, placement), { code: 'invalid' }, 'the job cannot set it itself');
});

t.test('error: conflict for more memory or cores than the machine offers', async (t) => {
  t.throws(() => toContainerConfig(spec({ ramBytes: machine.ramBytes + 1 }), machine, placement), { code: 'conflict' });
  t.throws(() => checkContainerConfig(spec({ ramBytes: machine.ramBytes + 1 }), machine), { code: 'conflict' }, 'the check before placement refuses the same');
  t.throws(() => toContainerConfig(spec({ cpuCores: 65 }), machine, placement), { code: 'conflict' });
});

t.test('error: invalid for a reserved env name', async (t) => {
  t.throws(() => toContainerConfig(spec({ env: { GF_JOB_ID: 'other' } }), machine, placement), ContainerConfigError);
  t.throws(() => toContainerConfig(spec({ env: { GF_JOB_ID: 'other' } }), machine, placement), { code: 'invalid' });
});

t.test('error: unsupported for an allowlist network policy', async (t) => {
  t.throws(() => toContainerConfig(spec({ networkPolicy: { mode: 'allowlist', allow: ['pypi.org'] } }), machine, placement), { code: 'unsupported' });
});
