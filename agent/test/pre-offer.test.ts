import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { DRIVER_MISMATCH_FIX, FABRIC_MANAGER_FIX, gpuHealthReportSchema, gpuHealthVerdict, PERSISTENCE_MODE_FIX, splitReasonFix } from '@gpufarm/shared';
import { nvmlLibraryVersionsIn, parseKernelModuleVersion, sameDriverVersion, systemDriverHost, type DriverHostFacts } from '../src/inventory/driver-host.js';
import { nvidiaSmiReader, parseDriverMismatch } from '../src/inventory/gpu-reader.js';
import { parseNvidiaSmiXml } from '../src/inventory/nvidia-smi-xml.js';
import { preOfferChecks } from '../src/inventory/pre-offer.js';
import { decideHealth, gpuHealthReports, type ProbeState } from '../src/inventory/snapshot.js';
import { fakeHostRoot, fakeSystemctl } from './helpers/fake-driver-host.js';
import { fakeNvidiaSmi, fixturePath, type Fixture } from './helpers/fake-nvidia-smi.js';

/**
 * The pre-offer checks from recorded outputs: nvidia-smi's (the fake serves them, as a real
 * process), the driver's files on a host root of the test's, and a fake `systemctl` on PATH.
 */

const NOW = new Date('2026-11-28T05:00:00Z');
const parse = (name: Fixture) => parseNvidiaSmiXml(readFileSync(fixturePath(name), 'utf8'));
const passed: ProbeState = { kind: 'done', result: { ok: true, listed: [] } };
const byName = (checks: ReturnType<typeof preOfferChecks>, name: string) => checks.find((c) => c.name === name)!;

t.test('parsers: /proc/driver/nvidia/version, NVML library file names, nvidia-smi\'s mismatch text', async (t) => {
  const fixture = (name: string) => readFileSync(new URL(`./fixtures/driver-host/${name}.txt`, import.meta.url), 'utf8');
  t.equal(parseKernelModuleVersion(fixture('proc-driver-nvidia-version-535.129.03')), '535.129.03');
  t.equal(parseKernelModuleVersion(fixture('proc-driver-nvidia-version-570.86.15-open')), '570.86.15', 'the open kernel modules');
  t.equal(parseKernelModuleVersion('nothing of the sort'), null);
  t.same(nvmlLibraryVersionsIn(['libnvidia-ml.so', 'libnvidia-ml.so.1', 'libnvidia-ml.so.570.124.06', 'libnvidia-ml.so.570.86.15', 'libcuda.so.570.124.06']), ['570.124.06', '570.86.15']);
  t.ok(sameDriverVersion('570.124', '570.124.06'), 'NVML prints major.minor');
  t.notOk(sameDriverVersion('570.124', '570.86.15'));
  const text = readFileSync(new URL('./fixtures/nvidia-smi/driver-library-mismatch-570.txt', import.meta.url), 'utf8');
  t.same(parseDriverMismatch(18, text), { nvmlLibraryVersion: '570.124' });
  t.same(parseDriverMismatch(18, 'Failed to initialize NVML: Driver/library version mismatch\n'), { nvmlLibraryVersion: null }, 'an older driver names no version');
  t.equal(parseDriverMismatch(9, 'NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver.'), null);
});

t.test('behavior: a driver upgraded without a reboot: nvidia-smi fails with the mismatch, the machine is unhealthy with both versions and the fix, never "no GPU"', async (t) => {
  const smi = fakeNvidiaSmi('8x-h100-sxm5');
  t.teardown(smi.cleanup);
  smi.fail('driver-library-mismatch-570');
  const host = fakeHostRoot({ procVersion: 'proc-driver-nvidia-version-570.86.15-open', nvmlLibraries: ['570.124.06'] });
  t.teardown(host.cleanup);
  const reading = await nvidiaSmiReader({ command: join(smi.binDir, 'nvidia-smi') }).read();
  t.match(reading, { ok: false, missing: false, driverMismatch: { nvmlLibraryVersion: '570.124' }, reason: /Driver\/library version mismatch/ });
  const facts = await systemDriverHost({ hostRoot: host.root }).read({ fabricAttached: false });
  t.same(facts, { kernelModuleVersion: '570.86.15', nvmlLibraryVersions: ['570.124.06'], nvswitchCount: 0, fabricManager: null });
  const check = byName(preOfferChecks(reading, facts), 'driver libraries');
  t.equal(check.status, 'fail');
  t.match(check.detail, /kernel module \(570\.86\.15\) and the user-space libraries \(570\.124\) are of different driver versions/);
  t.equal(check.fix, DRIVER_MISMATCH_FIX);
  const health = decideHealth({ simulated: false, reading, probe: { kind: 'not_run' }, host: facts, now: NOW });
  t.same([health.status, health.gpuProbe], ['unhealthy', 'not_run'], 'the GPUs are there: not "no_gpus"');
  const { what, fix } = splitReasonFix(health.reason!);
  t.match(what, /570\.86\.15.*570\.124/);
  t.match(fix, /^reboot, or reload the nvidia kernel modules/);
  t.notMatch(health.reason!, /no GPU|lists no/i);
  // Without the host's files the versions are unknown, the verdict the same.
  t.match(decideHealth({ simulated: false, reading, probe: { kind: 'not_run' }, host: null, now: NOW }).reason, /user-space libraries \(570\.124\) are of different driver versions .*; fix: reboot/);
  smi.use('8x-h100-sxm5');
  const after = await nvidiaSmiReader({ command: join(smi.binDir, 'nvidia-smi') }).read();
  t.equal(byName(preOfferChecks(after, facts), 'driver libraries').status, 'ok', 'after the reboot');
});

t.test('behavior: persistence mode off warns with the fix; the GPU stays offered', async (t) => {
  const report = parse('rtx-4090');
  t.equal(report.gpus[0]!.health.persistenceMode, false, '<persistence_mode>Disabled</persistence_mode>');
  t.equal(parse('h100-80gb-hbm3').gpus[0]!.health.persistenceMode, true);
  const reading = { ok: true as const, report };
  const check = byName(preOfferChecks(reading, null), 'persistence mode');
  t.same([check.status, check.fix], ['warn', PERSISTENCE_MODE_FIX]);
  t.match(check.detail, /^GPU 0: persistence mode is off/);
  t.equal(decideHealth({ simulated: false, reading, probe: passed, host: null, now: NOW }).status, 'healthy', 'a warning is no reason to withdraw the machine');
  const [gpu] = gpuHealthReports(reading, null, new Map());
  gpuHealthReportSchema.parse(gpu);
  t.same(gpuHealthVerdict(gpu!, NOW), { verdict: 'warning', reasons: [`persistence mode is off: the driver is torn down and set up again around each job, which slows job starts and can fail their first GPU call; ${PERSISTENCE_MODE_FIX}`] });
  t.equal(byName(preOfferChecks({ ok: true, report: parse('h100-80gb-hbm3') }, null), 'persistence mode').status, 'ok');
});

t.test('behavior: an HGX H100 whose fabric manager did not set the NVSwitch fabric up fails, each GPU and the machine, with the fix', async (t) => {
  const report = parse('8x-h100-sxm5-fabric-in-progress');
  t.same(report.gpus[3]!.health.fabric, { state: 'In Progress', status: null }, 'status N/A: none yet');
  const reading = { ok: true as const, report };
  const check = byName(preOfferChecks(reading, null), 'fabric manager');
  t.equal(check.status, 'fail');
  t.match(check.detail, /^an NVSwitch system \(8 GPU\(s\) with a fabric\): GPU 0, 1, 2, 3, 4, 5, 6, 7: the NVSwitch fabric is not ready \(state In Progress, status N\/A\): CUDA fails with "system not yet initialized"/);
  t.equal(check.fix, FABRIC_MANAGER_FIX);
  const health = decideHealth({ simulated: false, reading, probe: passed, host: null, now: NOW });
  t.same([health.status, health.gpuProbe], ['unhealthy', 'passed'], 'unhealthy though a container sees the GPUs');
  t.match(splitReasonFix(health.reason!).fix, /systemctl enable --now nvidia-fabricmanager/);
  for (const r of gpuHealthReports(reading, null, new Map())) {
    const v = gpuHealthVerdict(gpuHealthReportSchema.parse(r), NOW);
    t.equal(v.verdict, 'failed', `GPU ${r.index}: the control plane's own verdict`);
    t.match(v.reasons[0], /NVSwitch fabric is not ready.*nvidia-fabricmanager/);
  }
  // The same machine once the fabric manager finished: ready, and no service to ask without systemd.
  const ready = { ok: true as const, report: parse('8x-h100-sxm5') };
  t.match(byName(preOfferChecks(ready, null), 'fabric manager'), { status: 'ok', detail: /the fabric is ready/ });
  t.equal(byName(preOfferChecks({ ok: true, report: parse('rtx-4090') }, null), 'fabric manager').status, 'skip', 'not an NVSwitch system');
});

t.test('behavior: the fabric manager service: systemd\'s word through a fake systemctl on PATH; an A100 HGX told by its NVSwitches', async (t) => {
  const systemctl = fakeSystemctl({ 'nvidia-fabricmanager.service': 'failed' });
  t.teardown(systemctl.cleanup);
  const withSystemd = fakeHostRoot({ procVersion: 'proc-driver-nvidia-version-535.129.03', nvmlLibraries: ['535.129.03'], systemd: true });
  t.teardown(withSystemd.cleanup);
  const hgx = { ok: true as const, report: parse('8x-h100-sxm5') };
  const read = (root: string, fabricAttached: boolean) => systemDriverHost({ hostRoot: root, systemctl: join(systemctl.binDir, 'systemctl') }).read({ fabricAttached });

  let facts: DriverHostFacts = await read(withSystemd.root, true);
  t.same(facts.fabricManager, { kind: 'state', state: 'failed' });
  const failed = byName(preOfferChecks(hgx, facts), 'fabric manager');
  t.equal(failed.status, 'fail', 'the fabric was set up, but its manager died: failed');
  t.match(failed.detail, /the nvidia-fabricmanager\.service service is failed$/);
  systemctl.set('nvidia-fabricmanager.service', 'active');
  facts = await read(withSystemd.root, true);
  t.match(byName(preOfferChecks(hgx, facts), 'fabric manager'), { status: 'ok', detail: /nvidia-fabricmanager\.service is active/ });
  t.equal(byName(preOfferChecks(hgx, facts), 'driver libraries').detail, 'kernel module and libraries are driver 535.129.03');

  // An HGX A100: Ampere reports no fabric state (N/A); the kernel lists its six NVSwitches.
  const a100 = fakeHostRoot({ nvswitches: ['0000:c4:00.0', '0000:c5:00.0', '0000:c6:00.0', '0000:c7:00.0', '0000:c8:00.0', '0000:c9:00.0'], systemd: true });
  t.teardown(a100.cleanup);
  systemctl.set('nvidia-fabricmanager.service', 'inactive');
  facts = await read(a100.root, false);
  t.same([facts.nvswitchCount, facts.fabricManager], [6, { kind: 'state', state: 'inactive' }]);
  const a100Check = byName(preOfferChecks({ ok: true, report: parse('8x-a100-sxm4-80gb') }, facts), 'fabric manager');
  t.equal(a100Check.status, 'fail');
  t.match(a100Check.detail, /^an NVSwitch system \(6 NVSwitch\(es\)\): the nvidia-fabricmanager\.service service is inactive/);

  // No systemd (a container, another init): the service is not asked.
  const noSystemd = fakeHostRoot({ nvswitches: ['0000:c4:00.0'] });
  t.teardown(noSystemd.cleanup);
  facts = await read(noSystemd.root, true);
  t.same(facts.fabricManager, { kind: 'no_systemd', detail: 'systemd is not the init system' });
  t.match(byName(preOfferChecks(hgx, facts), 'fabric manager'), { status: 'ok', detail: /its service was not asked \(systemd is not the init system\)/ });
  // Not an NVSwitch system: systemctl is never run.
  t.equal((await read(withSystemd.root, false)).fabricManager, null);
});
