import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { agentMessageSchema, enrollRequestSchema, serverMessageSchema, type GpuInventory } from '@gpufarm/shared';
import { backoffDelay } from '../src/link/backoff.js';
import { loadConfig, ConfigError } from '../src/config/config.js';
import { parseNvidiaSmiXml, NvidiaSmiParseError } from '../src/inventory/nvidia-smi-xml.js';
import { decideHealth, gpusFromReading } from '../src/inventory/snapshot.js';
import { parseComputeCapabilities } from '../src/inventory/gpu-reader.js';
import { parseNvidiaSmiList } from '../src/inventory/gpu-probe.js';
import { parseSimulatedGpus, SimulatedGpuSpecError } from '../src/inventory/simulated.js';
import { tierFor, tierForRatio } from '../src/benchmark/tiers.js';
import { LogOutbox } from '../src/logs/outbox.js';
import { fixturePath, type Fixture } from './helpers/fake-nvidia-smi.js';

const MiB = 1024 * 1024;

t.test('parseNvidiaSmiXml: recorded outputs', async (t) => {
  const rows = [
    { fixture: 'h100-80gb-hbm3', gpus: 1, first: { name: 'NVIDIA H100 80GB HBM3', vramBytes: 81559 * MiB, temperatureC: 31, utilizationPercent: 0, memoryUsedBytes: 3 * MiB, powerDrawWatts: 71.05, powerLimitWatts: 700 } },
    { fixture: 'h100-80gb-hbm3-driver-550', gpus: 1, first: { powerDrawWatts: 612.44, utilizationPercent: 87, memoryUsedBytes: 61234 * MiB, temperatureC: 64 } },
    { fixture: 'a100-sxm4-40gb', gpus: 1, first: { name: 'NVIDIA A100-SXM4-40GB', powerDrawWatts: 54.26, powerLimitWatts: 400 } },
    { fixture: 'rtx-4090', gpus: 1, first: { utilizationPercent: 12, memoryUsedBytes: 1843 * MiB, powerLimitWatts: 450 } },
    { fixture: 'l4', gpus: 1, first: { powerDrawWatts: 16.18, powerLimitWatts: 72 } },
    { fixture: '8x-a100-sxm4-80gb', gpus: 8, first: { utilizationPercent: 98, temperatureC: 58 } },
  ] as const;
  for (const row of rows) {
    const report = parseNvidiaSmiXml(readFileSync(fixturePath(row.fixture), 'utf8'));
    t.equal(report.gpus.length, row.gpus, `${row.fixture}: GPU count`);
    t.match(report.gpus[0], row.first, `${row.fixture}: first GPU`);
    t.same(report.gpus.map((g) => g.index), [...Array(row.gpus).keys()], `${row.fixture}: indexes in order`);
  }
});

t.test('parseNvidiaSmiXml: N/A and malformed input', async (t) => {
  const xml = readFileSync(fixturePath('l4'), 'utf8').replace('<gpu_temp>36 C</gpu_temp>', '<gpu_temp>N/A</gpu_temp>').replace('<gpu_util>0 %</gpu_util>', '<gpu_util>[Unknown Error]</gpu_util>');
  const gpu = parseNvidiaSmiXml(xml).gpus[0]!;
  t.equal(gpu.temperatureC, null);
  t.equal(gpu.utilizationPercent, null);
  t.throws(() => parseNvidiaSmiXml('<html>nope</html>'), NvidiaSmiParseError);
  t.throws(() => parseNvidiaSmiXml('<nvidia_smi_log><gpu><uuid>x</uuid></gpu></nvidia_smi_log>'), NvidiaSmiParseError);
  t.same(parseNvidiaSmiXml('<nvidia_smi_log><driver_version>550.1</driver_version><attached_gpus>0</attached_gpus></nvidia_smi_log>').gpus, []);
});

t.test('gpusFromReading: each recorded card with its class, or why it is not offered', async (t) => {
  const rows: Array<{ fixture: Fixture; cc: string | null; expected: Partial<GpuInventory> }> = [
    { fixture: 't4', cc: '7.5', expected: { name: 'Tesla T4', classId: 't4-16gb', architecture: 'turing', computeCapability: '7.5', pciDeviceId: '0x1EB810DE', notOfferedReason: null } },
    { fixture: 'rtx-3060', cc: '8.6', expected: { classId: 'rtx-3060-12gb', architecture: 'ampere' } },
    { fixture: 'a100-sxm4-40gb', cc: null, expected: { classId: 'a100-40gb', architecture: 'ampere', computeCapability: '8.0' } },
    { fixture: 'rtx-4000-sff-ada', cc: '8.9', expected: { classId: 'rtx-4000-sff-ada-20gb', architecture: 'ada' } },
    { fixture: 'rtx-4090', cc: '8.9', expected: { classId: 'rtx-4090-24gb' } },
    { fixture: 'l4', cc: '8.9', expected: { classId: 'l4-24gb' } },
    { fixture: 'h100-80gb-hbm3', cc: '9.0', expected: { classId: 'h100-80gb-sxm', architecture: 'hopper' } },
    { fixture: 'rtx-5090', cc: '12.0', expected: { classId: 'rtx-5090-32gb', architecture: 'blackwell', computeCapability: '12.0' } },
    { fixture: 'b200-graphics-device-driver-570.86', cc: '10.0', expected: { name: 'NVIDIA Graphics Device', classId: 'b200-180gb', architecture: 'blackwell' } },
    { fixture: 'rtx-a2000-12gb', cc: '8.6', expected: { classId: 'derived-nvidia-rtx-a2000-12gb', architecture: 'ampere', notOfferedReason: null } },
    { fixture: 'gtx-1080-ti', cc: '6.1', expected: { classId: null, architecture: 'pascal', computeCapability: '6.1', notOfferedReason: 'compute capability 6.1 (Pascal) is older than 7.5 (Turing), the oldest offered: CUDA 13 and the benchmark do not support it' } },
  ];
  for (const row of rows) {
    const report = parseNvidiaSmiXml(readFileSync(fixturePath(row.fixture), 'utf8'));
    const withCc = { ...report, gpus: report.gpus.map((g) => ({ ...g, computeCapability: row.cc })) };
    const [gpu] = gpusFromReading({ ok: true, report: withCc });
    t.match(gpu, row.expected, row.fixture);
  }
});

t.test('parseComputeCapabilities: the answer of --query-gpu=pci.bus_id,compute_cap, or an older driver\'s refusal', async (t) => {
  const caps = parseComputeCapabilities('00000000:18:00.0, 9.0\n00000000:3B:00.0, 12.0\n00000000:5E:00.0, [N/A]\n');
  t.same([...caps], [['0000:18:00.0', '9.0'], ['0000:3b:00.0', '12.0']]);
  t.same([...parseComputeCapabilities('Field "compute_cap" is not a valid field to query.\n')], []);
});

t.test('decideHealth', async (t) => {
  const now = new Date('2026-11-22T00:00:00Z');
  const { health } = parseNvidiaSmiXml(readFileSync(fixturePath('l4'), 'utf8')).gpus[0]!;
  const report = { driverVersion: '550', cudaVersion: '12.4', lost: [], gpus: [{ index: 0, uuid: 'GPU-1', name: 'NVIDIA L4', vramBytes: 1, temperatureC: null, utilizationPercent: null, memoryUsedBytes: null, powerDrawWatts: null, powerLimitWatts: null, pciBusId: null, pciDeviceId: null, productArchitecture: null, computeCapability: null, health }] };
  t.match(decideHealth({ simulated: true, reading: null, probe: { kind: 'not_run' }, now }), { status: 'healthy', gpuProbe: 'simulated' });
  t.match(decideHealth({ simulated: false, reading: { ok: false, missing: true, reason: 'nvidia-smi was not found' }, probe: { kind: 'not_run' }, now }), { status: 'unhealthy', gpuProbe: 'no_gpus', reason: /install the NVIDIA driver/ });
  t.match(decideHealth({ simulated: false, reading: { ok: true, report: { ...report, gpus: [] } }, probe: { kind: 'not_run' }, now }), { status: 'unhealthy', gpuProbe: 'no_gpus' });
  t.match(decideHealth({ simulated: false, reading: { ok: true, report }, probe: { kind: 'not_run' }, now }), { status: 'unhealthy', gpuProbe: 'not_run' });
  t.match(decideHealth({ simulated: false, reading: { ok: true, report }, probe: { kind: 'done', result: { ok: false, reason: 'no runtime' } }, now }), { status: 'unhealthy', gpuProbe: 'failed', reason: /no runtime/ });
  const listed = [{ name: 'NVIDIA L4', uuid: 'GPU-1' }];
  t.match(decideHealth({ simulated: false, reading: { ok: true, report }, probe: { kind: 'done', result: { ok: true, listed } }, now }), { status: 'healthy', gpuProbe: 'passed', reason: null, probeListing: listed });
  t.equal(decideHealth({ simulated: true, reading: null, probe: { kind: 'not_run' }, now }).probeListing, undefined, 'no listing without a probe');
});

t.test('parseNvidiaSmiList', async (t) => {
  const text = [
    'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-2c1e6a2f-63c4-9a2b-6f56-5c1de4c7c7a0)',
    '  MIG 1g.10gb     Device  0: (UUID: MIG-0b9c7f0e-1111-2222-3333-444444444444)',
    'GPU 1: NVIDIA GeForce RTX 4090 (UUID: GPU-7f3a0000-0000-0000-0000-000000000001)',
    'No devices were found',
    '',
  ].join('\n');
  t.same(parseNvidiaSmiList(text), [
    { name: 'NVIDIA H100 80GB HBM3', uuid: 'GPU-2c1e6a2f-63c4-9a2b-6f56-5c1de4c7c7a0' },
    { name: 'NVIDIA GeForce RTX 4090', uuid: 'GPU-7f3a0000-0000-0000-0000-000000000001' },
  ]);
  t.same(parseNvidiaSmiList('No devices were found\n'), []);
});

t.test('parseSimulatedGpus', async (t) => {
  t.same(parseSimulatedGpus('2x h100-80gb-sxm'), [{ count: 2, classId: 'h100-80gb-sxm' }]);
  t.same(parseSimulatedGpus(' 1X rtx-4090-24gb , 3x l4-24gb'), [{ count: 1, classId: 'rtx-4090-24gb' }, { count: 3, classId: 'l4-24gb' }]);
  t.throws(() => parseSimulatedGpus('2 h100'), SimulatedGpuSpecError);
  t.throws(() => parseSimulatedGpus('2x h200'), /unknown class "h200"/);
  t.throws(() => parseSimulatedGpus('17x l4-24gb'), /between 1 and 16/);
});

t.test('tiers', async (t) => {
  t.equal(tierForRatio(1.2), 'S');
  t.equal(tierForRatio(0.95), 'A');
  t.equal(tierForRatio(0.75), 'B');
  t.equal(tierForRatio(0.2), 'C');
  const host = { diskWriteMBps: 2000, sha256MBps: 2000 };
  t.equal(tierFor({ gpus: [{ classId: 'l4-24gb', matmulGflops: 120_000, memoryBandwidthMbps: 290_000 }], host }), 'S');
  t.equal(tierFor({ gpus: [{ classId: 'l4-24gb', matmulGflops: 120_000, memoryBandwidthMbps: 100_000 }], host }), 'C', 'the worst figure decides');
  t.equal(tierFor({ gpus: [{ classId: 'l4-24gb', matmulGflops: 120_000, memoryBandwidthMbps: 290_000 }], host: { diskWriteMBps: 10, sha256MBps: 2000 } }), 'B', 'a slow disk lowers the tier to B at most');
  t.equal(tierFor({ gpus: [], host }), null);
  t.equal(tierFor({ gpus: [{ classId: null, matmulGflops: 1, memoryBandwidthMbps: 1 }], host }), null);
  // A derived class is judged against its generation's floor, and is at most A.
  t.equal(tierFor({ gpus: [{ classId: 'derived-nvidia-rtx-a2000-12gb', architecture: 'ampere', matmulGflops: 1e6, memoryBandwidthMbps: 1e7 }], host }), 'A', 'far above the floor: still A');
  t.equal(tierFor({ gpus: [{ classId: 'derived-nvidia-rtx-a2000-12gb', architecture: 'ampere', matmulGflops: 1000, memoryBandwidthMbps: 1e7 }], host }), 'C', 'below the floor');
  t.equal(tierFor({ gpus: [{ classId: 'derived-nvidia-rtx-a2000-12gb', matmulGflops: 1e6, memoryBandwidthMbps: 1e7 }], host }), null, 'no generation: no tier');
});

t.test('backoffDelay: exponential with full jitter, capped', async (t) => {
  const o = { initialMs: 500, maxMs: 30_000 };
  t.equal(backoffDelay(0, o, () => 1), 500);
  t.equal(backoffDelay(3, o, () => 1), 4000);
  t.equal(backoffDelay(20, o, () => 1), 30_000);
  t.equal(backoffDelay(20, o, () => 0.5), 15_000);
  t.equal(backoffDelay(5, o, () => 0), 250, 'never below half the initial delay');
});

t.test('loadConfig', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gf-agent-config-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const toml = join(dir, 'agent.toml');
  writeFileSync(toml, 'state_dir = "/srv/gf"\nheartbeat_interval_seconds = 5\nsimulate_gpus = "2x h100-80gb-sxm"\n');
  const c = loadConfig({ path: toml, env: { GF_AGENT_HEARTBEAT_INTERVAL_SECONDS: '7' } });
  t.equal(c.stateDir, '/srv/gf');
  t.equal(c.heartbeatIntervalSeconds, 7, 'the environment overrides the file');
  t.equal(c.simulateGpus, '2x h100-80gb-sxm');
  t.equal(c.reconnectMaxMs, 30_000, 'defaults fill the rest');
  const json = join(dir, 'agent.json');
  writeFileSync(json, JSON.stringify({ server: 'https://cp.example.com', log_memory_bytes: 1048576 }));
  t.match(loadConfig({ path: json, env: {} }), { server: 'https://cp.example.com', logMemoryBytes: 1048576 });

  writeFileSync(toml, 'heartbeat_interval_seconds = 0\nstate_dirr = "/x"\n');
  t.throws(() => loadConfig({ path: toml, env: {} }), ConfigError);
  try {
    loadConfig({ path: toml, env: { GF_AGENT_SERVER: 'ftp://x' } });
  } catch (err) {
    const message = (err as Error).message;
    t.match(message, /config file .*agent\.toml: unknown setting "state_dirr"/);
    t.match(message, /agent\.toml: heartbeat_interval_seconds: must be at least 1/);
    t.match(message, /environment GF_AGENT_SERVER: must be an http\(s\) URL/);
  }
  t.equal(loadConfig({ env: { GF_AGENT_CONFIG: json } }).jobLogKeepBytes, 32 * 1024 * 1024, 'the log artifact keeps 32 MiB at each end by default');
  t.equal(loadConfig({ path: json, env: { GF_AGENT_JOB_LOG_KEEP_BYTES: '262144' } }).jobLogKeepBytes, 262_144);
  t.throws(() => loadConfig({ path: json, env: { GF_AGENT_JOB_LOG_KEEP_BYTES: String(512 * 1024 * 1024) } }), /GF_AGENT_JOB_LOG_KEEP_BYTES: must be at most \d+/, 'both ends stay under the server\'s 1 GiB log limit');
  t.equal(loadConfig({ path: json, env: {} }).kernelLog, '/dev/kmsg', 'XIDs come from the kernel ring buffer by default');
  writeFileSync(toml, 'kernel_log = ""\n');
  t.equal(loadConfig({ path: toml, env: {} }).kernelLog, null, 'empty: no kernel log is read');
  t.equal(loadConfig({ path: json, env: { GF_AGENT_KERNEL_LOG: '/var/log/kern.log' } }).kernelLog, '/var/log/kern.log');
  writeFileSync(toml, 'this is = not toml =\n');
  t.throws(() => loadConfig({ path: toml, env: {} }), /not valid TOML/);
  t.throws(() => loadConfig({ path: join(dir, 'missing.toml'), env: {} }), /cannot be read \(ENOENT\)/);
});

t.test('protocol schemas', async (t) => {
  t.equal(agentMessageSchema.safeParse({ type: 'logs', assignmentId: 'a', lines: [{ seq: 0, stream: 'stdout', atMs: 1, line: 'x' }, { seq: 2, stream: 'stdout', atMs: 1, line: 'y' }] }).success, false, 'a gap inside a batch is refused');
  t.equal(agentMessageSchema.safeParse({ type: 'logs', assignmentId: 'a', lines: [] }).success, false, 'an empty batch is refused');
  t.equal(agentMessageSchema.safeParse({ type: 'logs', assignmentId: 'a', lines: [{ seq: 5, stream: 'system', atMs: 1, line: 'pulling' }] }).success, true);
  t.equal(serverMessageSchema.safeParse({ type: 'logs.ack', assignmentId: 'a', seq: -1 }).success, false);
  t.equal(serverMessageSchema.safeParse({ type: 'reboot' }).success, false, 'an unknown type is refused');
  t.equal(serverMessageSchema.safeParse({ type: 'drain', undrain: false, reason: null, extra: 1 }).success, false, 'unknown fields are refused');
  t.equal(enrollRequestSchema.shape.enrollmentToken.safeParse('gfa_' + 'x'.repeat(43)).success, false, 'a machine token is not an enrollment token');
});

t.test('LogOutbox: numbering, acks, rewind and spill', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gf-agent-outbox-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const box = new LogOutbox({ assignmentId: 'a1', spoolDir: dir, memoryBytes: 2_000, firstSeq: 10 });
  for (let i = 0; i < 100; i++) t.equal(box.append('stdout', `l${i}`, 0), 10 + i);
  t.ok(box.spilled > 0, 'past 2,000 bytes lines spill');
  const first = box.takeBatch(64 * 1024, 10_000);
  t.equal(first[0]!.seq, 10);
  t.ok(first.length < 100, 'only memory is sent; spilled lines wait for acks');
  t.same(box.takeBatch(64 * 1024, 10_000), [], 'nothing more until an ack');
  box.rewind(null);
  t.equal(box.takeBatch(64 * 1024, 10_000)[0]!.seq, 10, 'a rewind sends from the first unacked line');
  const seen: number[] = [];
  for (let guard = 0; guard < 100 && box.unacked > 0; guard++) {
    box.rewind(null);
    const batch = box.takeBatch(64 * 1024, 10_000);
    seen.push(...batch.map((l) => l.seq));
    box.ack(batch.at(-1)!.seq);
  }
  t.same(seen, [...Array(100).keys()].map((i) => i + 10), 'every line once, in order, through the spill');
  box.close();
});
