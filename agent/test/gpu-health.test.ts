import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { gpuHealthReportSchema, gpuHealthVerdict, heartbeatMessageSchema, machineHealthVerdict } from '@gpufarm/shared';
import { nvidiaSmiReader } from '../src/inventory/gpu-reader.js';
import { KernelLogWatcher, parseKernelLogLine } from '../src/inventory/kernel-log.js';
import { normalizePciBusId, parseNvidiaSmiXml } from '../src/inventory/nvidia-smi-xml.js';
import { gpuHealthReports } from '../src/inventory/snapshot.js';
import { testDaemon } from './helpers/daemon.js';
import { fakeNvidiaSmi, FIXTURES, fixturePath, kernelLogFixturePath, type FakeNvidiaSmi, type Fixture } from './helpers/fake-nvidia-smi.js';
import { TestPeer } from './helpers/peer.js';

/**
 * GPU health from recorded outputs: each nvidia-smi fixture and kernel log through the parser,
 * the agent's reports and the shared verdict.
 */

const NOW = new Date('2026-11-25T12:00:00Z');
const parse = (name: Fixture) => parseNvidiaSmiXml(readFileSync(fixturePath(name), 'utf8'));

function verdicts(name: Fixture, kernelLog: KernelLogWatcher | null = null) {
  const reports = gpuHealthReports({ ok: true, report: parse(name) }, kernelLog, new Map());
  for (const r of reports) gpuHealthReportSchema.parse(r);
  return reports.map((r) => ({ index: r.index, uuid: r.uuid, ...gpuHealthVerdict(r, NOW) }));
}

t.test('every fixture parses; the ones without faults are healthy', async (t) => {
  for (const name of FIXTURES) t.ok(parse(name).gpus.length > 0, `${name} parses`);
  for (const name of ['h100-80gb-hbm3', 'h100-80gb-hbm3-driver-550', 'a100-sxm4-40gb', 'l4', '8x-a100-sxm4-80gb', '8x-h100-sxm5'] as const) {
    t.same(verdicts(name).map((v) => v.verdict), verdicts(name).map(() => 'healthy'), `${name}: healthy`);
  }
  const desktop = verdicts('rtx-4090');
  t.same(desktop.map((v) => [v.verdict, v.reasons.length]), [['warning', 1]], 'rtx-4090: healthy but for its persistence mode (off, as on this desktop card)');
  t.match(desktop[0]!.reasons[0], /^persistence mode is off: /);
  const consumer = parse('rtx-4090').gpus[0]!.health;
  t.same(consumer.ecc, { volatileCorrectable: null, volatileUncorrectable: null, aggregateCorrectable: null, aggregateUncorrectable: null }, 'no ECC block: counts unknown, not zero');
});

t.test('parser: ECC, retired pages, remapped rows, clock events, temperature thresholds, fan, PCIe', async (t) => {
  const dbe = parse('h100-80gb-hbm3-ecc-dbe').gpus[0]!;
  t.same(dbe.health.ecc, { volatileCorrectable: 3, volatileUncorrectable: 2, aggregateCorrectable: 41, aggregateUncorrectable: 2 });
  t.same(dbe.health.remappedRows, { correctable: 0, uncorrectable: 1, pending: true, failure: false });
  t.same(dbe.health.retiredPages, { singleBit: null, doubleBit: null, pending: null }, 'N/A on a card that remaps rows instead');
  t.equal(dbe.pciBusId, '00000000:18:00.0');
  t.equal(dbe.health.slowdownTempC, 89);
  t.equal(dbe.health.shutdownTempC, 92);
  t.equal(dbe.health.fanPercent, null, 'a passive card prints N/A');
  t.same(dbe.health.pcie, { currentGen: 5, maxGen: 5, currentWidth: 16, maxWidth: 16 });

  t.same(parse('h100-80gb-hbm3-remap-failure').gpus[0]!.health.remappedRows, { correctable: 8, uncorrectable: 9, pending: false, failure: true });
  t.same(parse('h100-80gb-hbm3-pcie-x8').gpus[0]!.health.pcie, { currentGen: 5, maxGen: 5, currentWidth: 8, maxWidth: 16 });

  const hot = parse('a100-sxm4-40gb-thermal').gpus[0]!;
  t.same(hot.health.clockEvents, { hwSlowdown: true, hwThermalSlowdown: true, hwPowerBrakeSlowdown: false, swThermalSlowdown: true, swPowerCap: false }, 'the older clocks_throttle_reasons element');
  t.equal(hot.temperatureC, 90);
  t.same(hot.health.ecc, { volatileCorrectable: 0, volatileUncorrectable: 0, aggregateCorrectable: 4, aggregateUncorrectable: 0 }, 'single_bit/double_bit totals of the 470 driver');
  t.equal(parse('rtx-4090').gpus[0]!.health.fanPercent !== null, true, 'a consumer card reports its fan');
});

t.test('a GPU that fell off the bus: the others keep their index; it is listed as lost at its place', async (t) => {
  const report = parse('8x-a100-sxm4-80gb-gpu0-lost');
  t.same(report.lost, [{ index: 0, pciBusId: '0000:07:00.0', reason: 'Unknown Error' }]);
  t.same(report.gpus.map((g) => g.index), [1, 2, 3, 4, 5, 6, 7]);
  t.equal(report.gpus[0]!.uuid, 'GPU-7e20e8a2-41c7-1d3b-8f0e-2a6c9b4d71e1', 'GPU 1 is still GPU 1');

  // Some drivers list the lost GPU with `Unknown Error` in place of its values instead.
  const inline = parseNvidiaSmiXml(readFileSync(fixturePath('h100-80gb-hbm3'), 'utf8').replace(/<uuid>[^<]+<\/uuid>/, '<uuid>Unknown Error</uuid>').replace(/<product_name>[^<]+<\/product_name>/, '<product_name>Unknown Error</product_name>'));
  t.same(inline.gpus, []);
  t.same(inline.lost, [{ index: 0, pciBusId: '00000000:18:00.0', reason: 'Unknown Error' }]);

  // nvidia-smi exits 15 with that output: the reader still takes the report.
  const smi = fakeNvidiaSmi('8x-a100-sxm4-80gb-gpu0-lost');
  t.teardown(smi.cleanup);
  const reading = await nvidiaSmiReader({ command: join(smi.binDir, 'nvidia-smi') }).read();
  t.equal(reading.ok, true, reading.ok ? '' : reading.reason);
  if (reading.ok) t.equal(reading.report.lost.length, 1);

  // A lost GPU keeps the UUID it had when last read.
  const known = new Map([[normalizePciBusId('00000000:07:00.0')!, { uuid: 'GPU-3b1ce8a2-41c7-0d3b-8f0e-2a6c9b4d71e0', index: 0 }]]);
  const [lost] = gpuHealthReports({ ok: true, report }, null, known);
  t.match(lost, { index: 0, uuid: 'GPU-3b1ce8a2-41c7-0d3b-8f0e-2a6c9b4d71e0', lost: true, lostReason: 'Unknown Error' });
  t.match(gpuHealthVerdict(lost!, NOW), { verdict: 'failed', reasons: [/nvidia-smi cannot read the GPU \(Unknown Error\)/] });
});

t.test('kernel log lines: XID with its PCI address, and the UUID the driver names at load', async (t) => {
  t.same(parseKernelLogLine("[86021.004122] NVRM: Xid (PCI:0000:07:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."), {
    kind: 'xid', pciBusId: '0000:07:00.0', code: 79, detail: "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
  });
  t.same(parseKernelLogLine('6,1244,9104512,-;NVRM: GPU at PCI:0000:18:00: GPU-2c1e6a2f-63c4-9a2b-6f56-5c1de4c7c7a0'), { kind: 'gpu_at', pciBusId: '0000:18:00.0', uuid: 'GPU-2c1e6a2f-63c4-9a2b-6f56-5c1de4c7c7a0' });
  t.equal(parseKernelLogLine('[    5.912204] nvidia: loading out-of-tree module taints kernel.'), null);
  t.equal(normalizePciBusId('00000000:3B:00.0'), normalizePciBusId('0000:3b:00'), 'nvidia-smi and the kernel spell one address two ways');

  const missing = new KernelLogWatcher('/nonexistent/kmsg', () => NOW);
  missing.poll();
  t.match(missing.problem, /^the kernel log \/nonexistent\/kmsg cannot be read \(ENOENT\): XID errors are not seen$/, 'an unreadable log says so');
  t.same(missing.xidsFor('0000:07:00.0'), []);
});

t.test('XID 79 from a dmesg-style kernel log read as it grows: GPU 0 failed, the machine keeps its other GPUs', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gf-kernel-log-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'kern.log');
  const lines = readFileSync(kernelLogFixturePath('8x-a100-xid-79.dmesg'), 'utf8').split('\n');
  const firstFault = lines.findIndex((l) => l.includes(': 79,'));
  writeFileSync(path, `${lines.slice(0, firstFault).join('\n')}\n`);
  const watcher = new KernelLogWatcher(path, () => NOW);
  t.teardown(() => watcher.close());
  watcher.poll();
  t.equal(watcher.problem, null);
  const before = verdicts('8x-a100-sxm4-80gb', watcher);
  t.same(before.map((v) => v.verdict), Array(8).fill('healthy'), 'XID 13 is the job\'s fault: ignored');
  t.equal(watcher.xidsFor('00000000:47:00.0')[0]?.count, 2, 'the XID 13 lines are counted');

  appendFileSync(path, `${lines.slice(firstFault).join('\n')}`);
  watcher.poll();
  const after = gpuHealthReports({ ok: true, report: parse('8x-a100-sxm4-80gb-gpu0-lost') }, watcher, new Map());
  t.match(after[0], { index: 0, uuid: 'GPU-3b1ce8a2-41c7-0d3b-8f0e-2a6c9b4d71e0', lost: true, xids: [{ code: 79, count: 1 }] }, 'the UUID the driver logged for the address');
  const v = gpuHealthVerdict(after[0]!, NOW);
  t.equal(v.verdict, 'failed');
  t.match(v.reasons, [/cannot read the GPU/, /^XID 79: the GPU fell off the PCIe bus; reseat or replace it/]);
  const all = after.map((r) => ({ index: r.index, ...gpuHealthVerdict(r, NOW) }));
  t.same(all.slice(1).map((g) => g.verdict), Array(7).fill('healthy'));
  t.match(machineHealthVerdict({ machineUnhealthyReason: null, gpus: all }), { verdict: 'warning', reasons: [/^GPU 0 failed: /] });
});

t.test('XID 48 from /dev/kmsg records; ECC DBE, remap failure, thermal slowdown and PCIe x8 give their verdicts', async (t) => {
  const watcher = new KernelLogWatcher(kernelLogFixturePath('h100-xid-48.kmsg'), () => NOW);
  t.teardown(() => watcher.close());
  watcher.poll();
  const [dbe] = verdicts('h100-80gb-hbm3-ecc-dbe', watcher);
  t.equal(dbe!.verdict, 'failed');
  t.match(dbe!.reasons.join('\n'), /XID 48: double-bit ECC error/);
  t.match(dbe!.reasons.join('\n'), /2 uncorrectable \(double-bit\) ECC errors since the driver loaded: reset the GPU/);
  t.match(dbe!.reasons.join('\n'), /XID 63: ECC page retirement or row remapping recorded/, 'warnings are listed after the failures');
  t.match(dbe!.reasons.join('\n'), /a memory row remap is pending/);

  const [remap] = verdicts('h100-80gb-hbm3-remap-failure');
  t.same(remap, { index: 0, uuid: 'GPU-2c1e6a2f-63c4-9a2b-6f56-5c1de4c7c7a0', verdict: 'failed', reasons: ['row remapping failed: the memory has no spare rows left; replace the GPU'] });

  const [hot] = verdicts('a100-sxm4-40gb-thermal');
  t.equal(hot!.verdict, 'warning', 'a slowdown is offered, and shown');
  t.match(hot!.reasons, [/^thermal slowdown/, /^the temperature is at or above the slowdown threshold \(89 C\)/]);
  const [cooler] = gpuHealthReports({ ok: true, report: parse('a100-sxm4-40gb-thermal') }, null, new Map());
  t.same(gpuHealthVerdict({ ...cooler!, temperatureC: 91 }, NOW), gpuHealthVerdict(cooler!, NOW), 'a degree more is the same verdict in the same words (not stored again)');

  const [pcie] = verdicts('h100-80gb-hbm3-pcie-x8');
  t.same(pcie!.verdict, 'warning');
  t.match(pcie!.reasons, [/^PCIe link runs at x8 of x16: reseat the GPU or its riser/]);
});

t.test('verdict details: warning XIDs fade after an hour, failed ones stay; an idle link at a lower gen is fine', async (t) => {
  const [base] = gpuHealthReports({ ok: true, report: parse('h100-80gb-hbm3') }, null, new Map());
  const at = (minutesAgo: number) => new Date(NOW.getTime() - minutesAgo * 60_000).toISOString();
  t.equal(gpuHealthVerdict({ ...base!, xids: [{ code: 63, count: 1, lastAt: at(30), detail: '' }] }, NOW).verdict, 'warning');
  t.equal(gpuHealthVerdict({ ...base!, xids: [{ code: 63, count: 1, lastAt: at(90), detail: '' }] }, NOW).verdict, 'healthy');
  t.equal(gpuHealthVerdict({ ...base!, xids: [{ code: 79, count: 1, lastAt: at(600), detail: '' }] }, NOW).verdict, 'failed');
  t.match(gpuHealthVerdict({ ...base!, xids: [{ code: 9999, count: 1, lastAt: at(1), detail: '' }] }, NOW), { verdict: 'warning', reasons: [/XID 9999: an XID code this service does not know/] });
  t.equal(gpuHealthVerdict({ ...base!, utilizationPercent: 0, pcie: { currentGen: 1, maxGen: 5, currentWidth: 16, maxWidth: 16 } }, NOW).verdict, 'healthy', 'idle: the link steps down');
  t.equal(gpuHealthVerdict({ ...base!, utilizationPercent: 90, pcie: { currentGen: 3, maxGen: 5, currentWidth: 16, maxWidth: 16 } }, NOW).verdict, 'warning');
  t.equal(gpuHealthVerdict({ ...base!, temperatureC: 93, shutdownTempC: 92, slowdownTempC: 89 }, NOW).verdict, 'failed', 'at the shutdown threshold');
  t.match(machineHealthVerdict({ machineUnhealthyReason: null, gpus: [{ index: 0, verdict: 'failed', reasons: ['x'] }] }), { verdict: 'failed', reasons: ['no GPU is usable', 'GPU 0 failed: x'] });
  t.match(machineHealthVerdict({ machineUnhealthyReason: 'GPU container probe failed', gpus: [{ index: 0, verdict: 'healthy', reasons: [] }] }), { verdict: 'failed' });
  t.match(machineHealthVerdict({ machineUnhealthyReason: null, gpus: [{ index: 0, verdict: 'healthy', reasons: [] }] }), { verdict: 'healthy', reasons: [] });
});

t.test('protocol: a heartbeat with 64 GPUs of full reports passes the schema and stays bounded', async (t) => {
  const [base] = gpuHealthReports({ ok: true, report: parse('h100-80gb-hbm3') }, null, new Map());
  const xids = Array.from({ length: 16 }, (_, i) => ({ code: i + 1, count: 1000, lastAt: NOW.toISOString(), detail: 'x'.repeat(200) }));
  const heartbeat = {
    type: 'heartbeat', sentAt: NOW.toISOString(), health: { status: 'healthy', reason: null, gpuProbe: 'passed', checkedAt: NOW.toISOString() }, gpus: [], inventory: null, runningAssignmentIds: [], draining: false,
    gpuHealth: Array.from({ length: 64 }, (_, i) => ({ ...base!, index: i, xids })),
  };
  t.ok(heartbeatMessageSchema.safeParse(heartbeat).success);
  t.ok(JSON.stringify(heartbeat).length < 512 * 1024, 'under 512 KiB at the most the schema allows');
  t.notOk(heartbeatMessageSchema.safeParse({ ...heartbeat, gpuHealth: [{ ...base!, xids: [...xids, xids[0]] }] }).success, 'at most 16 XID codes per GPU');
});

/** A daemon reading the fake nvidia-smi, linked to a test peer that speaks `versions`. */
async function daemonOnPeer(t: Test, smi: FakeNvidiaSmi, versions: number[]) {
  const peer = await TestPeer.start({ heartbeatIntervalSeconds: 1, versions });
  t.teardown(() => peer.close());
  const { machineToken } = peer.addMachine(`m_v${versions.at(-1)}`);
  const agent = testDaemon({ server: peer.url, machineToken, nvidiaSmi: join(smi.binDir, 'nvidia-smi'), daemon: { inventoryIntervalSeconds: 1 } });
  t.teardown(agent.cleanup);
  await agent.daemon.start();
  return { peer, agent };
}

t.test('protocol: the daemon sends gpuHealth only when welcome chose 4', async (t) => {
  const smi = fakeNvidiaSmi('h100-80gb-hbm3-ecc-dbe');
  t.teardown(smi.cleanup);
  for (const versions of [[1, 2, 3], [1, 2, 3, 4]]) {
    const { peer, agent } = await daemonOnPeer(t, smi, versions);
    await peer.waitFor(() => peer.messages('heartbeat').length >= 2, 'two heartbeats');
    const sent = peer.messages('heartbeat').map((h) => h.gpuHealth);
    if (versions.includes(4)) {
      t.match(sent[0], [{ index: 0, uuid: 'GPU-2c1e6a2f-63c4-9a2b-6f56-5c1de4c7c7a0', ecc: { volatileUncorrectable: 2 }, remappedRows: { pending: true } }], 'protocol 4: the counters in the first heartbeat');
      t.same(sent.slice(1), sent.slice(1).map(() => undefined), 'and not again while they are unchanged');
    } else t.same(sent, sent.map(() => undefined), 'protocol 3: no gpuHealth field');
    t.same(peer.invalid, [], 'every heartbeat passed the server\'s schema');
    await agent.cleanup();
  }
});

t.test('protocol: persistence mode and the NVSwitch fabric go in gpuHealth only when welcome chose 6', async (t) => {
  const smi = fakeNvidiaSmi('8x-h100-sxm5-fabric-in-progress');
  t.teardown(smi.cleanup);
  for (const versions of [[1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6]]) {
    const { peer, agent } = await daemonOnPeer(t, smi, versions);
    await peer.waitFor(() => peer.messages('heartbeat').some((h) => h.gpuHealth !== undefined), 'the GPU health reports');
    const first = peer.messages('heartbeat').find((h) => h.gpuHealth !== undefined)!.gpuHealth!;
    t.equal(first.length, 8);
    if (versions.includes(6)) t.match(first[0], { index: 0, persistenceMode: true, fabric: { state: 'In Progress', status: null } }, 'protocol 6: reported');
    else t.same(first.map((r) => 'persistenceMode' in r || 'fabric' in r), Array(8).fill(false), 'protocol 5: left out');
    t.same(peer.invalid, [], 'every heartbeat passed the server\'s schema');
    await agent.cleanup();
  }
});
