import { mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { capacityListSchema, gpuHealthReportSchema, splitReasonFix, type MachineHealth } from '@gpufarm/shared';
import { AgentDaemon, InventoryMonitor, nvidiaSmiReader, rejectingRunner, silentLog, systemDriverHost, systemHostReader, toWireInventory } from '@gpufarm/agent';
import { fakeHostRoot, type FakeHostRootOptions } from '@gpufarm/agent/testing/fake-driver-host';
import { fakeNvidiaSmi, type Fixture } from '@gpufarm/agent/testing/fake-nvidia-smi';
import { machineGpuHealth } from '@gpufarm/control-plane/fleet';
import { findMachineFacts, operatorMachineView } from '@gpufarm/control-plane/operator';
import { enrollMachine, startGatewayApp } from '@gpufarm/control-plane/testing/agent-client';
import { until } from './helpers/wait.js';

/**
 * The pre-offer checks end to end in one process: the real agent daemon (fake nvidia-smi, the
 * driver's files on a host root of the test's) linked to the real control plane (gateway, offer
 * index, GPU verdicts, the operator's machine view on PostgreSQL).
 */

t.setTimeout(180_000);

/** The control plane and an enrolled, verified agent daemon on the fake GPUs of `fixture`, reading the driver's files from `host`. */
async function linkedAgent(t: Test, fixture: Fixture, host: FakeHostRootOptions, expect: MachineHealth['status']) {
  const smi = fakeNvidiaSmi(fixture);
  t.teardown(smi.cleanup);
  const root = fakeHostRoot(host);
  t.teardown(root.cleanup);
  const dir = mkdtempSync(join(tmpdir(), 'gf-pre-offer-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const cp = await startGatewayApp(t, { env: { GF_HEARTBEAT_SECONDS: '1' } });
  const inventory = new InventoryMonitor(
    { gpus: nvidiaSmiReader({ command: join(smi.binDir, 'nvidia-smi') }), host: systemHostReader(dir), probe: smi.probe, driverHost: systemDriverHost({ hostRoot: root.root }), now: () => new Date() },
    { agentVersion: '0.0.0-test', simulate: null, hostRefreshMs: 60_000, probeIntervalMs: 600_000, probeRetryMs: 600_000 },
  );
  const first = await inventory.refresh();
  t.equal(first.health.status, expect, first.health.reason ?? 'healthy');
  const { machineId, machineToken } = await enrollMachine(cp.app, cp.db, toWireInventory(first));
  // The GPU challenge is another slice's test: this machine starts verified.
  await cp.db.query(`UPDATE machines SET verification = 'verified' WHERE id = $1`, [machineId]);
  const daemon = new AgentDaemon(
    { inventory, runner: rejectingRunner(), benchmark: () => null, log: silentLog },
    { server: cp.url, machineToken, agentVersion: '0.0.0-test', spoolDir: join(dir, 'spool'), logMemoryBytes: 1 << 20, heartbeatIntervalSeconds: 1, inventoryIntervalSeconds: 1, reconnect: { initialMs: 20, maxMs: 200 } },
  );
  t.teardown(() => daemon.stop());
  await daemon.start();
  const [{ farm_id: farmId }] = (await cp.db.query<{ farm_id: string }>('SELECT farm_id FROM machines WHERE id = $1', [machineId])) as [{ farm_id: string }];
  /** GPUs of `classId` in /v1/capacity (0 when no offer). */
  const offered = async (classId: string) => {
    const res = await cp.app.inject({ method: 'GET', url: '/v1/capacity' });
    return capacityListSchema.parse(res.json()).data.find((o) => o.gpu.classId === classId)?.count ?? 0;
  };
  /** What the operator's machine page shows (`GET /operator/api/machines/:id`). */
  const operatorView = async () => operatorMachineView((await findMachineFacts(cp.db, [farmId], machineId))!, []);
  const machineRow = async () => (await cp.db.query<{ status: string; health_reason: string | null; gpu_health: unknown }>('SELECT status, health_reason, gpu_health FROM machines WHERE id = $1', [machineId]))[0]!;
  return { smi, root: root.root, cp, machineId, offered, operatorView, machineRow };
}

t.test('behavior: a driver upgraded without a reboot: the machine goes unhealthy naming both versions, its GPUs leave /v1/capacity, the operator page gives the fix; offered again once the driver matches', async (t) => {
  const { smi, root, offered, operatorView, machineRow } = await linkedAgent(t, '8x-h100-sxm5', { procVersion: 'proc-driver-nvidia-version-535.129.03', nvmlLibraries: ['535.129.03'] }, 'healthy');
  await until(async () => (await offered('h100-80gb-sxm')) === 8, 'the 8 H100s offered');

  // apt upgraded the user-space libraries to 570.124.06; the 535 kernel module stays loaded.
  const libs = join(root, 'usr/lib/x86_64-linux-gnu');
  renameSync(join(libs, 'libnvidia-ml.so.535.129.03'), join(libs, 'libnvidia-ml.so.570.124.06'));
  smi.fail('driver-library-mismatch-570');
  await until(async () => (await machineRow()).status === 'unhealthy', 'the machine reported unhealthy');
  const row = await machineRow();
  const { what, fix } = splitReasonFix(row.health_reason!);
  t.match(what, /^the NVIDIA kernel module \(535\.129\.03\) and the user-space libraries \(570\.124\) are of different driver versions/);
  t.match(fix, /^reboot, or reload the nvidia kernel modules/);
  await until(async () => (await offered('h100-80gb-sxm')) === 0, 'its GPUs withdrawn');
  const view = await operatorView();
  t.match(view.earning, { earning: false, code: 'unhealthy', reason: /^Unhealthy: the NVIDIA kernel module \(535\.129\.03\) and the user-space libraries \(570\.124\)/, fix: /^Reboot, or reload the nvidia kernel modules \(.*\), then run `gf-agent doctor` on the machine\.$/ });
  t.notMatch(view.earning.reason, /no GPU/i, 'never "no GPU"');

  // The upgrade is rolled back: module and libraries are 535 again (a reboot into 570 would do as well).
  renameSync(join(libs, 'libnvidia-ml.so.570.124.06'), join(libs, 'libnvidia-ml.so.535.129.03'));
  smi.use('8x-h100-sxm5');
  await until(async () => (await offered('h100-80gb-sxm')) === 8, 'offered again');
  t.equal((await machineRow()).status, 'online');
});

t.test('behavior: an HGX H100 whose fabric manager has not set the NVSwitch fabric up is not offered, with the fix; once the fabric is ready it is', async (t) => {
  const { smi, machineId, cp, offered, operatorView, machineRow } = await linkedAgent(t, '8x-h100-sxm5-fabric-in-progress', { procVersion: 'proc-driver-nvidia-version-535.129.03', nvmlLibraries: ['535.129.03'] }, 'unhealthy');
  // The control plane records each GPU's fabric as reported (protocol 6) and judges it itself.
  await until(async () => {
    const reports = gpuHealthReportSchema.array().safeParse((await machineRow()).gpu_health ?? []);
    return reports.success && reports.data.length === 8 && reports.data.every((r) => r.fabric?.state === 'In Progress');
  }, 'the fabric state of each GPU stored');
  const row = await machineRow();
  t.equal(row.status, 'unhealthy');
  t.match(splitReasonFix(row.health_reason!).what, /^an NVSwitch system \(8 GPU\(s\) with a fabric\): GPU 0, 1, 2, 3, 4, 5, 6, 7: the NVSwitch fabric is not ready \(state In Progress, status N\/A\)/);
  t.equal(await offered('h100-80gb-sxm'), 0);
  const view = await operatorView();
  t.match(view.earning, { earning: false, code: 'unhealthy', reason: /NVSwitch fabric is not ready/, fix: /^Install and start the fabric manager of the driver's exact version: `systemctl enable --now nvidia-fabricmanager`/ });
  t.equal((await machineGpuHealth(cp.db, machineId))?.machine.verdict, 'failed');

  // The fabric manager finished: state Completed, status Success.
  smi.use('8x-h100-sxm5');
  await until(async () => (await offered('h100-80gb-sxm')) === 8, 'the 8 H100s offered');
  await until(async () => (await machineGpuHealth(cp.db, machineId))?.gpus.every((g) => g.verdict === 'healthy'), 'every GPU judged healthy');
  t.equal((await operatorView()).earning.earning, true);
});

t.test('behavior: persistence mode off: the GPU warns with the fix on the operator page and stays offered', async (t) => {
  const { cp, machineId, offered, operatorView } = await linkedAgent(t, 'rtx-4090', { procVersion: 'proc-driver-nvidia-version-535.129.03' }, 'healthy');
  await until(async () => (await offered('rtx-4090-24gb')) === 1, 'the RTX 4090 offered');
  await until(async () => (await machineGpuHealth(cp.db, machineId))?.gpus[0]?.verdict === 'warning', 'GPU 0 judged warning');
  const view = await operatorView();
  t.match(view.gpus[0], { index: 0, verdict: 'warning', reasons: [/^persistence mode is off: .*; enable persistence mode: `nvidia-smi -pm 1` \(until the next reboot\) or `systemctl enable --now nvidia-persistenced`$/] });
  t.equal(view.earning.earning, true, 'still earning');
  t.equal(await offered('rtx-4090-24gb'), 1);
});
