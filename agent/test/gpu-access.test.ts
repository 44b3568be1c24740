import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { CONTAINER_GPU_LOSS_FIX, LOG_LEVELS, splitReasonFix } from '@gpufarm/shared';
import { gpuAccessGuard } from '../src/daemon/gpu-access-setup.js';
import { nvidiaSmiReader } from '../src/inventory/gpu-reader.js';
import { systemHostReader } from '../src/inventory/host.js';
import { InventoryMonitor } from '../src/inventory/monitor.js';
import type { AssignmentContext, AssignmentReport } from '../src/link/assignment-runner.js';
import { execInContainer } from '../src/docker/exec.js';
import { DockerAssignmentRunner } from '../src/runner/docker-runner.js';
import { DockerRestartWatch, judgeContainerGpus } from '../src/runtime/gpu-access.js';
import { busyboxSpec, busyboxWithUser, docker, testRuntime, waitFor } from './helpers/docker.js';
import { testDaemon } from './helpers/daemon.js';
import { fakeNvidiaSmi } from './helpers/fake-nvidia-smi.js';
import { TestPeer } from './helpers/peer.js';
import { ownDockerd, ownDockerdUnavailable } from './helpers/own-dockerd.js';
import { memoryLog } from './helpers/log.js';

/**
 * Jobs whose containers lose their GPUs (a Docker restart or `systemctl daemon-reload` under the
 * NVIDIA Container Toolkit): real containers on the real dockerd, each with the `nvidia-smi` a
 * container gets from the toolkit faked inside it (the GPU is the only fake), which answers
 * as such a container does once its device rules are gone.
 */

const keys = generateKeyPairSync('ed25519');
const UUID = 'GPU-2c1e6a2f-63c4-9a2b-6f56-5c1de4c7c7a0';

/** nvidia-smi in a container: its GPUs, or NVML's words once `/tmp/gf-gpu-lost` exists (the device rules rewritten). */
const CONTAINER_NVIDIA_SMI = `#!/bin/sh
# nvidia-smi -L as a GPU container answers it (fake GPU for gpufarm's tests)
if [ -e /tmp/gf-gpu-lost ]; then echo "Failed to initialize NVML: Unknown Error"; exit 255; fi
i=0
for u in $FAKE_GPU_UUIDS; do echo "GPU $i: NVIDIA H100 80GB HBM3 (UUID: $u)"; i=$((i+1)); done
`;

t.test('judgeContainerGpus: what nvidia-smi -L in a container says', async (t) => {
  const rows: Array<[string, number | null, string, string[], string]> = [
    ['its GPU listed', 0, `GPU 0: NVIDIA H100 80GB HBM3 (UUID: ${UUID})\n`, [UUID], 'ok'],
    ['the toolkit issue: NVML cannot start', 255, 'Failed to initialize NVML: Unknown Error\n', [UUID], 'lost'],
    ['no device left', 6, 'No devices were found\n', [UUID], 'lost'],
    ['one of two GPUs gone', 0, `GPU 0: NVIDIA H100 80GB HBM3 (UUID: ${UUID})\n`, [UUID, 'GPU-other'], 'lost'],
    ['an image without nvidia-smi', 126, 'OCI runtime exec failed: exec failed: unable to start container process: exec: "nvidia-smi": executable file not found in $PATH: unknown\r\n', [UUID], 'unknown'],
    ['another failure', 1, 'something else\n', [UUID], 'unknown'],
  ];
  for (const [what, code, output, uuids, kind] of rows) t.equal(judgeContainerGpus(code, output, uuids).kind, kind, what);
  t.same(judgeContainerGpus(255, 'Failed to initialize NVML: Unknown Error\n', [UUID]), { kind: 'lost', detail: 'nvidia-smi -L in it said "Failed to initialize NVML: Unknown Error"' });
});

t.test('behavior: a running GPU job whose container loses its GPUs is stopped and reported failed (gpu_lost); the machine is unhealthy with the fix until a later probe passes', async (t) => {
  const image = await busyboxWithUser(t, { user: '65534', files: { '/bin/nvidia-smi': { text: CONTAINER_NVIDIA_SMI, mode: 0o755 } } });
  const runtime = testRuntime(t);
  const runner = new DockerAssignmentRunner({ runtime, uploadUrl: () => 'http://127.0.0.1:1/never', uploadHeaders: () => ({}), machineKey: keys.privateKey });
  const smi = fakeNvidiaSmi('h100-80gb-hbm3');
  t.teardown(smi.cleanup);
  const dir = mkdtempSync(join(tmpdir(), 'gf-gpu-access-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  let clock = Date.parse('2026-11-28T05:00:00Z');
  const inventory = new InventoryMonitor(
    { gpus: nvidiaSmiReader({ command: join(smi.binDir, 'nvidia-smi') }), host: systemHostReader(dir), probe: smi.probe, now: () => new Date(clock) },
    { agentVersion: '0.0.0-test', simulate: null, hostRefreshMs: 3_600_000, probeIntervalMs: 3_600_000, probeRetryMs: 60_000 },
  );
  t.equal((await inventory.refresh()).health.status, 'healthy');
  const guard = gpuAccessGuard({ docker, runner, inventory, log: memoryLog().log, intervalMs: 3_600_000 });
  t.teardown(() => guard.stop());

  const reports: AssignmentReport[] = [];
  const system: string[] = [];
  const spec = busyboxSpec({ image: image.repository, imageDigest: image.digest, command: ['sleep', '600'], gpus: [{ index: 0, uuid: UUID }], env: { FAKE_GPU_UUIDS: UUID } });
  const ctx: AssignmentContext = {
    assignmentId: spec.assignmentId,
    logs: {
      assignmentId: spec.assignmentId,
      write: (stream, line) => {
        if (stream === 'system') system.push(line);
        return system.length;
      },
      nextSeq: 0,
      drained: async () => undefined,
      release: () => undefined,
    },
    report: (r) => reports.push(r),
    partitioned: false,
  };
  t.same(await runner.accept(spec, ctx), { accepted: true });
  await waitFor(() => runner.gpuJobs().length === 1, 60_000);
  const [job] = runner.gpuJobs();
  t.same(await guard.watch.checkAll('the test'), [], 'its container still lists its GPU');
  t.equal(inventory.latest!.health.status, 'healthy');

  // The device rules of the running container are rewritten: its nvidia-smi fails from now on.
  await execInContainer(docker, job!.containerId, 'touch /tmp/gf-gpu-lost');
  const lost = await guard.watch.checkAll('the test');
  t.same(lost.map((j) => j.assignmentId), [spec.assignmentId]);
  const health = inventory.latest!.health;
  t.equal(health.status, 'unhealthy', 'no new job lands on the machine meanwhile');
  const { what, fix } = splitReasonFix(health.reason!);
  t.match(what, /^a running job's container lost access to its GPUs \(nvidia-smi -L in it said "Failed to initialize NVML: Unknown Error"\)/);
  t.equal(fix, CONTAINER_GPU_LOSS_FIX);

  await waitFor(() => reports.some((r) => r.state === 'failed'), 60_000);
  const failed = reports.find((r) => r.state === 'failed')!;
  // `pulling` only when the image was not on the machine yet.
  t.same(reports.map((r) => r.state).filter((s) => s !== 'pulling'), ['starting', 'running', 'failed'], 'no upload, no finished');
  t.equal(failed.failure!.code, 'gpu_lost');
  t.match(failed.failure!.message, /^the job's container lost access to its GPUs \(nvidia-smi -L in it said "Failed to initialize NVML: Unknown Error"\) after the machine's Docker daemon restarted or systemd reloaded its units$/);
  t.ok(system.some((l) => l.startsWith('stopped by the machine: the job\'s container lost access to its GPUs')), system.join('\n'));
  await waitFor(async () => (await docker.listContainers({ all: true, filters: { id: [job!.containerId] } })).length === 0, 30_000);
  t.pass('the container was removed');
  t.same(runner.gpuJobs(), []);

  // Unhealthy until a probe `probeRetryMs` after the loss passes.
  clock += 30_000;
  t.equal((await inventory.refresh()).health.status, 'unhealthy', 'before the retry');
  clock += 30_000;
  t.equal((await inventory.refresh()).health.status, 'healthy', 'a new container sees the GPUs: offered again');
});

t.test('behavior: a job whose image has no nvidia-smi cannot be checked and runs on', async (t) => {
  const runtime = testRuntime(t);
  const runner = new DockerAssignmentRunner({ runtime, uploadUrl: () => 'http://127.0.0.1:1/never', uploadHeaders: () => ({}), machineKey: keys.privateKey });
  const memory = memoryLog();
  const lostCalls: string[] = [];
  const guard = gpuAccessGuard({ docker, runner, inventory: { containerGpuLost: (r) => void lostCalls.push(r) }, log: memory.log, intervalMs: 3_600_000 });
  t.teardown(() => guard.stop());
  const spec = busyboxSpec({ command: ['sleep', '600'], gpus: [{ index: 0, uuid: UUID }] });
  const reports: AssignmentReport[] = [];
  const ctx: AssignmentContext = {
    assignmentId: spec.assignmentId,
    logs: { assignmentId: spec.assignmentId, write: () => 0, nextSeq: 0, drained: async () => undefined, release: () => undefined },
    report: (r) => reports.push(r),
    partitioned: false,
  };
  await runner.accept(spec, ctx);
  await waitFor(() => runner.gpuJobs().length === 1, 60_000);
  t.same(await guard.watch.checkAll('the test'), []);
  t.same(lostCalls, []);
  const line = memory.lines.find((l) => l.msg === `assignment ${spec.assignmentId}: its GPU access cannot be checked (its image has no nvidia-smi)`);
  t.match(line, { level: LOG_LEVELS.warn, jobId: spec.jobId, assignmentId: spec.assignmentId }, `the job's line carries its ids as fields: ${JSON.stringify(memory.lines)}`);
  t.same(reports.map((r) => r.state).filter((s) => s !== 'pulling'), ['starting', 'running']);
  await runner.cancel(spec.assignmentId, 'the test is over');
});

t.test('protocol: the failure goes as gpu_lost to a control plane on protocol 6, as lost to one on 5', async (t) => {
  const image = await busyboxWithUser(t, { user: '65534', files: { '/bin/nvidia-smi': { text: CONTAINER_NVIDIA_SMI, mode: 0o755 } } });
  for (const versions of [[1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6]]) {
    const peer = await TestPeer.start({ heartbeatIntervalSeconds: 1, versions });
    t.teardown(() => peer.close());
    const { machineToken } = peer.addMachine(`m_v${versions.at(-1)}`);
    const runner = new DockerAssignmentRunner({ runtime: testRuntime(t), uploadUrl: (id, name) => `${peer.url}/agent/v1/assignments/${id}/outputs/${name}`, uploadHeaders: () => ({ authorization: `Bearer ${machineToken}` }), machineKey: keys.privateKey });
    // Simulated GPUs: the runtime gives the container none; its nvidia-smi is the test image's.
    const agent = testDaemon({ server: peer.url, machineToken, simulate: '1x h100-80gb-sxm', runner });
    t.teardown(agent.cleanup);
    await agent.daemon.start();
    await peer.waitFor(() => peer.messages('hello').length === 1, 'hello');
    const uuid = agent.inventory.latest!.detected[0]!.uuid;
    const spec = busyboxSpec({ image: image.repository, imageDigest: image.digest, command: ['sleep', '600'], gpus: [{ index: 0, uuid }], env: { FAKE_GPU_UUIDS: uuid } });
    peer.assign(spec);
    await waitFor(() => runner.gpuJobs().length === 1, 60_000);
    const guard = gpuAccessGuard({ docker, runner, inventory: agent.inventory, log: memoryLog().log, intervalMs: 3_600_000 });
    t.teardown(() => guard.stop());
    await execInContainer(docker, runner.gpuJobs()[0]!.containerId, 'touch /tmp/gf-gpu-lost');
    t.equal((await guard.watch.checkAll('the test')).length, 1);
    await peer.waitFor(() => peer.statuses(spec.assignmentId).some((m) => m.state === 'failed'), 'the failure reported');
    const failed = peer.statuses(spec.assignmentId).find((m) => m.state === 'failed')!;
    t.equal(failed.failure?.code, versions.includes(6) ? 'gpu_lost' : 'lost', `protocol ${versions.at(-1)}`);
    t.match(failed.failure?.message, /^the job's container lost access to its GPUs/);
    t.same(peer.invalid, [], 'every message passed the server\'s schema');
    guard.stop();
    await agent.cleanup();
  }
});

t.test('behavior: a Docker daemon restart is noticed on its event stream (a dockerd of the test\'s own, stopped by its pid and started again)', { skip: ownDockerdUnavailable() ?? false }, async (t) => {
  const dockerd = await ownDockerd(t);
  const restarts: string[] = [];
  const memory = memoryLog();
  const said = memory.messages;
  const watch = new DockerRestartWatch(dockerd.client, { onRestart: () => restarts.push('restart'), retryMs: 100, log: memory.log });
  t.teardown(() => watch.stop());
  await watch.start();
  t.same(restarts, [], 'its first stream is no restart');
  await dockerd.stop();
  await waitFor(() => said().length > 0, 30_000);
  t.match(said()[0], /the Docker daemon closed its event stream/);
  t.same(restarts, [], 'nothing to check while it is down');
  await dockerd.start();
  await waitFor(() => restarts.length > 0, 60_000);
  t.same(restarts, ['restart'], 'once it is back');
});
