import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { capacityListSchema, gpuHealthReportSchema, gpuVerdictLine } from '@gpufarm/shared';
import { AgentDaemon, type DaemonStatus, InventoryMonitor, KernelLogWatcher, nvidiaSmiReader, rejectingRunner, silentLog, systemHostReader, toWireInventory } from '@gpufarm/agent';
import { fakeNvidiaSmi, kernelLogFixturePath, type Fixture } from '@gpufarm/agent/testing/fake-nvidia-smi';
import { machineGpuHealth } from '@gpufarm/control-plane/fleet';
import { enrollMachine, insertJob, startGatewayApp } from '@gpufarm/control-plane/testing/agent-client';
import { until } from './helpers/wait.js';

/**
 * GPU health end to end in one process: the real agent daemon (fake nvidia-smi, a recorded
 * kernel log in a file it follows) linked to the real control plane (gateway, offer index,
 * execution lifecycle on PostgreSQL). GPU 0 of an 8x A100 machine falls off the bus mid-run.
 */

t.setTimeout(180_000);

/** The control plane, and an enrolled, verified agent daemon on the fake GPUs of `fixture` following a kernel log that starts with `kernelLines`. */
async function linkedAgent(t: Test, fixture: Fixture, kernelLines: string[]) {
  const smi = fakeNvidiaSmi(fixture);
  t.teardown(smi.cleanup);
  const dir = mkdtempSync(join(tmpdir(), 'gf-gpu-health-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const kernelLogPath = join(dir, 'kern.log');
  writeFileSync(kernelLogPath, kernelLines.map((l) => `${l}\n`).join(''));

  const cp = await startGatewayApp(t, { env: { GF_HEARTBEAT_SECONDS: '1' } });
  const inventory = new InventoryMonitor(
    { gpus: nvidiaSmiReader({ command: join(smi.binDir, 'nvidia-smi') }), host: systemHostReader(dir), probe: smi.probe, kernelLog: new KernelLogWatcher(kernelLogPath), now: () => new Date() },
    { agentVersion: '0.0.0-test', simulate: null, hostRefreshMs: 60_000, probeIntervalMs: 600_000, probeRetryMs: 600_000 },
  );
  const first = await inventory.refresh();
  t.equal(first.health.status, 'healthy', first.health.reason ?? '');
  const { machineId, machineToken } = await enrollMachine(cp.app, cp.db, toWireInventory(first));
  // The GPU challenge is another slice's test: this machine starts verified.
  await cp.db.query(`UPDATE machines SET verification = 'verified' WHERE id = $1`, [machineId]);

  const statuses: DaemonStatus[] = [];
  const cancels: Array<{ assignmentId: string; reason: string }> = [];
  const daemon = new AgentDaemon(
    {
      inventory,
      runner: { ...rejectingRunner(), cancel: async (assignmentId, reason) => void cancels.push({ assignmentId, reason }) },
      benchmark: () => null,
      onStatus: (s) => statuses.push(s),
      log: silentLog,
    },
    { server: cp.url, machineToken, agentVersion: '0.0.0-test', spoolDir: join(dir, 'spool'), logMemoryBytes: 1 << 20, heartbeatIntervalSeconds: 1, inventoryIntervalSeconds: 1, reconnect: { initialMs: 20, maxMs: 200 } },
  );
  t.teardown(() => daemon.stop());
  await daemon.start();
  /** The offer of `classId`, null when none. */
  const offer = async (classId: string) => {
    const res = await cp.app.inject({ method: 'GET', url: '/v1/capacity' });
    return capacityListSchema.parse(res.json()).data.find((o) => o.gpu.classId === classId) ?? null;
  };
  const appendKernelLog = (lines: string[]) => appendFileSync(kernelLogPath, lines.map((l) => `${l}\n`).join(''));
  const gpuRow = async (index: number) =>
    (await cp.db.query<{ health: string; health_reasons: string[]; busy: boolean; assignment_id: string | null }>(
      'SELECT health, health_reasons, busy, assignment_id FROM machine_gpus WHERE machine_id = $1 AND gpu_index = $2',
      [machineId, index],
    ))[0];
  return { smi, cp, machineId, statuses, cancels, offer, appendKernelLog, gpuRow };
}

t.test('behavior: XID 79 on GPU 0: withdrawn from /v1/capacity from the heartbeat that reports it, its job failed with gpu_failed and refunded, the other 7 GPUs still offered', async (t) => {
  const kernelLines = readFileSync(kernelLogFixturePath('8x-a100-xid-79.dmesg'), 'utf8').split('\n');
  const fault = kernelLines.findIndex((l) => l.includes('): 79,'));
  const { smi, cp, machineId, statuses, cancels, offer, appendKernelLog, gpuRow } = await linkedAgent(t, '8x-a100-sxm4-80gb', kernelLines.slice(0, fault));
  const a100 = () => offer('a100-80gb');
  await until(async () => (await a100())?.count === 8, 'the 8 A100s offered');
  const healthy = await machineGpuHealth(cp.db, machineId);
  t.equal(healthy?.machine.verdict, 'healthy');

  // A job running on GPU 0, on its third and last attempt (two earlier runs failed).
  const jobId = await insertJob(cp.db, 'RUNNING');
  const assignmentId = 'asg_gpu0_running';
  await cp.db.query(
    `INSERT INTO assignments (id, job_id, machine_id, attempt, state, gpu_indices, class_id, gpu_model, price_per_gpu_hour_micro_usd, spec, started_at)
     SELECT $1, $2, $3, 3, 'running', '{0}'::int[], 'a100-80gb', 'NVIDIA A100-SXM4-80GB', 450000, '{}'::jsonb, now()
     UNION ALL SELECT $1 || '_' || n, $2, $3, n, 'failed', '{0}'::int[], 'a100-80gb', 'NVIDIA A100-SXM4-80GB', 450000, '{}'::jsonb, now() FROM generate_series(1, 2) AS n`,
    [assignmentId, jobId, machineId],
  );
  await cp.db.query(`UPDATE machine_gpus SET busy = true, assignment_id = $2 WHERE machine_id = $1 AND gpu_index = 0`, [machineId, assignmentId]);
  await cp.db.query(`UPDATE jobs SET assignment_id = $2, attempts = 3 WHERE id = $1`, [jobId, assignmentId]);
  await until(async () => (await a100())?.busy === 1, 'GPU 0 busy');

  // GPU 0 falls off the bus: the kernel logs XID 79 and nvidia-smi can no longer read it.
  appendKernelLog(kernelLines.slice(fault));
  smi.use('8x-a100-sxm4-80gb-gpu0-lost');

  // The first stored report that shows it lost came with its verdict, in the same heartbeat's handling.
  const lostStored = async () => {
    const [row] = await cp.db.query<{ gpu_health: unknown }>('SELECT gpu_health FROM machines WHERE id = $1', [machineId]);
    const reports = gpuHealthReportSchema.array().safeParse(row?.gpu_health ?? []);
    return reports.success && reports.data.some((r) => r.index === 0 && r.lost);
  };
  await until(lostStored, 'a heartbeat reporting GPU 0 lost');
  const gpu0 = await gpuRow(0);
  t.equal(gpu0?.health, 'failed', 'judged failed by the heartbeat that reported it');
  t.match(gpu0?.health_reasons.join('\n'), /XID 79: the GPU fell off the PCIe bus; reseat or replace it/);
  t.equal(gpu0?.assignment_id, null, 'its assignment ended in that heartbeat too: the GPU is released');
  const [asg] = await cp.db.query<{ state: string; failure_code: string; failure_message: string }>('SELECT state, failure_code, failure_message FROM assignments WHERE id = $1', [assignmentId]);
  t.match(asg, { state: 'failed', failure_code: 'gpu_failed', failure_message: /^GPU 0: .*XID 79/ });
  const [job] = await cp.db.query<{ status: string; failure_reason: string }>('SELECT status, failure_reason FROM jobs WHERE id = $1', [jobId]);
  t.match(job, { status: 'FAILED', failure_reason: /^a GPU of the machine failed: GPU 0: / }, 'third attempt: FAILED');
  const lines = (await cp.db.query<{ line: string }>(`SELECT line FROM log_lines WHERE job_id = $1 AND stream = 'system' ORDER BY id`, [jobId])).map((r) => r.line);
  t.match(lines.at(-1), /^failed: a GPU of the machine failed: .*\(after 3 attempts\); nothing is charged and the escrow refund is authorized$/);
  const [excluded] = await cp.db.query<{ n: number }>('SELECT count(*)::int AS n FROM job_exclusions WHERE job_id = $1 AND machine_id = $2', [jobId, machineId]);
  t.equal(excluded?.n, 1, 'the machine is excluded for the job');

  await until(async () => (await a100())?.count === 7, 'GPU 0 withdrawn from /v1/capacity');
  t.match(await a100(), { count: 7, busy: 0, available: 7 }, 'the other seven still offered');
  const [machine] = await cp.db.query<{ status: string }>('SELECT status FROM machines WHERE id = $1', [machineId]);
  t.equal(machine?.status, 'online', 'the machine stays online for its other GPUs');
  await until(() => cancels.some((c) => c.assignmentId === assignmentId), 'the agent told to stop the container');
  t.match(cancels.find((c) => c.assignmentId === assignmentId)?.reason, /^a GPU of the machine failed: GPU 0/);

  const view = await machineGpuHealth(cp.db, machineId);
  t.equal(view?.machine.verdict, 'warning', 'a machine with a failed GPU among usable ones warns');
  t.match(view?.gpus[0], { index: 0, uuid: 'GPU-3b1ce8a2-41c7-0d3b-8f0e-2a6c9b4d71e0', verdict: 'failed', report: { lost: true, xids: [{ code: 79, count: 1 }] } });
  t.same(view?.gpus.slice(1).map((g) => g.verdict), Array(7).fill('healthy'));

  // `gf-agent status` prints the agent's own verdict lines (status.json is this status).
  const last = statuses.at(-1)!;
  t.equal(last.machineVerdict?.verdict, 'warning');
  t.match(gpuVerdictLine(last.gpuHealth[0]!), /^GPU 0 GPU-3b1ce8a2-41c7-0d3b-8f0e-2a6c9b4d71e0 failed: nvidia-smi cannot read the GPU \(Unknown Error\).*; XID 79: /);
});

t.test('behavior: a PCIe x8 link warns and stays offered; then XID 48 and uncorrectable ECC errors fail the GPU it still lists, and the machine has none left to offer', async (t) => {
  const kmsg = readFileSync(kernelLogFixturePath('h100-xid-48.kmsg'), 'utf8').trim().split('\n');
  const fault = kmsg.findIndex((l) => l.includes('): 48,'));
  const { smi, cp, machineId, offer, appendKernelLog, gpuRow } = await linkedAgent(t, 'h100-80gb-hbm3', kmsg.slice(0, fault));
  const h100 = () => offer('h100-80gb-sxm');
  await until(async () => (await h100())?.count === 1, 'the H100 offered');

  smi.use('h100-80gb-hbm3-pcie-x8');
  await until(async () => (await gpuRow(0))?.health === 'warning', 'the PCIe warning stored');
  t.match((await gpuRow(0))?.health_reasons, [/^PCIe link runs at x8 of x16/]);
  t.match(await h100(), { count: 1, available: 1 }, 'a warning GPU is still offered');
  t.match(await machineGpuHealth(cp.db, machineId), { machine: { verdict: 'warning', reasons: [/^GPU 0 warning: PCIe link runs at x8/] } });

  appendKernelLog(kmsg.slice(fault));
  smi.use('h100-80gb-hbm3-ecc-dbe');
  await until(async () => (await gpuRow(0))?.health === 'failed', 'the GPU judged failed');
  t.match((await gpuRow(0))?.health_reasons.join('\n'), /XID 48: double-bit ECC error.*\n2 uncorrectable \(double-bit\) ECC errors/);
  await until(async () => (await h100()) === null, 'the H100 withdrawn from /v1/capacity');
  const [machine] = await cp.db.query<{ status: string; inventory: { gpus: unknown[] } }>('SELECT status, inventory FROM machines WHERE id = $1', [machineId]);
  t.equal(machine?.inventory.gpus.length, 1, 'the agent still lists the GPU: its verdict is what withdrew it');
  t.equal(machine?.status, 'online');
  t.match(await machineGpuHealth(cp.db, machineId), { machine: { verdict: 'failed', reasons: ['no GPU is usable', /^GPU 0 failed: /] }, gpus: [{ report: { ecc: { volatileUncorrectable: 2 } } }] });
});
