import { mkdtempSync, rmSync } from 'node:fs';
import { hostname, networkInterfaces, tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { gfAgent } from './helpers/cli.js';
import { fakeNvidiaSmi, type Fixture } from './helpers/fake-nvidia-smi.js';

const MiB = 1024 * 1024;

const cases: Array<{ fixture: Fixture; count: number; classId: string | null; name: string; vramMiB: number; driver: string; cuda: string; architecture?: string; notOfferedReason?: RegExp }> = [
  { fixture: 'h100-80gb-hbm3', count: 1, classId: 'h100-80gb-sxm', name: 'NVIDIA H100 80GB HBM3', vramMiB: 81559, driver: '535.129.03', cuda: '12.2' },
  { fixture: 'h100-80gb-hbm3-driver-550', count: 1, classId: 'h100-80gb-sxm', name: 'NVIDIA H100 80GB HBM3', vramMiB: 81559, driver: '550.54.15', cuda: '12.4' },
  { fixture: 'a100-sxm4-40gb', count: 1, classId: 'a100-40gb', name: 'NVIDIA A100-SXM4-40GB', vramMiB: 40536, driver: '470.182.03', cuda: '11.4' },
  { fixture: 'rtx-4090', count: 1, classId: 'rtx-4090-24gb', name: 'NVIDIA GeForce RTX 4090', vramMiB: 24564, driver: '545.29.06', cuda: '12.3' },
  { fixture: 'l4', count: 1, classId: 'l4-24gb', name: 'NVIDIA L4', vramMiB: 23034, driver: '550.90.07', cuda: '12.4' },
  { fixture: '8x-a100-sxm4-80gb', count: 8, classId: 'a100-80gb', name: 'NVIDIA A100-SXM4-80GB', vramMiB: 81920, driver: '525.85.12', cuda: '12.0' },
  { fixture: 't4', count: 1, classId: 't4-16gb', name: 'Tesla T4', vramMiB: 15360, driver: '535.183.01', cuda: '12.2', architecture: 'turing' },
  { fixture: 'rtx-a2000-12gb', count: 1, classId: 'derived-nvidia-rtx-a2000-12gb', name: 'NVIDIA RTX A2000 12GB', vramMiB: 12282, driver: '545.29.06', cuda: '12.3', architecture: 'ampere' },
  { fixture: 'gtx-1080-ti', count: 1, classId: null, name: 'NVIDIA GeForce GTX 1080 Ti', vramMiB: 11264, driver: '535.183.01', cuda: '12.2', architecture: 'pascal', notOfferedReason: /^compute capability 6\.1 \(Pascal\) is older than 7\.5 \(Turing\), the oldest offered/ },
];

interface Printed {
  gpus: Array<{ index: number; uuid: string; name: string; classId: string | null; vramBytes: number; driverVersion: string; cudaVersion: string; simulated: boolean; temperatureC: number | null; powerDrawWatts: number | null; architecture?: string | null; notOfferedReason?: string | null }>;
  driverVersion: string | null;
  cudaVersion: string | null;
  detectedGpuCount: number;
  offered: boolean;
  health: { status: string; gpuProbe: string; reason: string | null };
}

/** Every string in a JSON value. */
function strings(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string') out.push(value);
  else if (Array.isArray(value)) value.forEach((v) => strings(v, out));
  else if (value && typeof value === 'object') Object.values(value).forEach((v) => strings(v, out));
  return out;
}

t.test('gf-agent inventory on each recorded nvidia-smi output', async (t) => {
  const stateDir = mkdtempSync(join(tmpdir(), 'gf-agent-inv-'));
  t.teardown(() => rmSync(stateDir, { recursive: true, force: true }));
  for (const c of cases) {
    t.test(`default: ${c.fixture}`, async (t) => {
      const smi = fakeNvidiaSmi(c.fixture);
      t.teardown(smi.cleanup);
      const res = await gfAgent(['inventory'], { PATH: smi.path, GF_AGENT_STATE_DIR: stateDir });
      t.equal(res.code, 0, res.stderr);
      const inv = JSON.parse(res.stdout) as Printed;
      t.equal(inv.gpus.length, c.count);
      t.equal(inv.detectedGpuCount, c.count);
      t.equal(inv.driverVersion, c.driver);
      t.equal(inv.cudaVersion, c.cuda);
      for (const [i, g] of inv.gpus.entries()) {
        t.equal(g.index, i);
        t.equal(g.classId, c.classId, `GPU ${i} class`);
        t.equal(g.name, c.name);
        t.equal(g.vramBytes, c.vramMiB * MiB, `GPU ${i} VRAM`);
        t.equal(g.driverVersion, c.driver);
        t.equal(g.cudaVersion, c.cuda);
        t.equal(g.simulated, false);
        t.match(g.uuid, /^GPU-[0-9a-f-]+$/);
        t.type(g.temperatureC, 'number');
        t.type(g.powerDrawWatts, 'number');
        if (c.architecture) t.equal(g.architecture, c.architecture, `GPU ${i} generation`);
        // A GPU that is not offered says why, never only a null class.
        if (c.notOfferedReason) t.match(g.notOfferedReason, c.notOfferedReason, `GPU ${i} reason`);
        else t.equal(g.notOfferedReason, null, `GPU ${i} offered`);
      }
      t.equal(new Set(inv.gpus.map((g) => g.uuid)).size, c.count, 'UUIDs are distinct');
      // Without the container probe nothing is offered, and it says why.
      t.equal(inv.offered, false);
      t.equal(inv.health.status, 'unhealthy');
      t.equal(inv.health.gpuProbe, 'not_run');
      t.match(inv.health.reason, /probe has not run/);
    });
  }
});

t.test('behavior: what leaves the machine carries no hostname, IP address or user name', async (t) => {
  const smi = fakeNvidiaSmi('8x-a100-sxm4-80gb');
  t.teardown(smi.cleanup);
  const stateDir = mkdtempSync(join(tmpdir(), 'gf-agent-inv-'));
  t.teardown(() => rmSync(stateDir, { recursive: true, force: true }));
  const res = await gfAgent(['inventory'], { PATH: smi.path, GF_AGENT_STATE_DIR: stateDir });
  t.equal(res.code, 0, res.stderr);
  const json = JSON.parse(res.stdout) as Record<string, unknown>;
  const values = strings(json);
  const host = hostname();
  const user = userInfo().username;
  const ips = Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((a) => a.address));
  for (const v of values) {
    t.not(v, host, 'no value is the hostname');
    t.not(v, user, 'no value is the user name');
    if (host.length >= 4) t.notOk(v.includes(host), `"${v}" does not contain the hostname`);
    for (const ip of ips) t.notOk(v.includes(ip), `"${v}" does not contain ${ip}`);
    t.notMatch(v, /\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b/, 'no IPv4 address');
  }
  const text = JSON.stringify(json).toLowerCase();
  for (const key of ['hostname', 'fqdn', 'serial', 'pci_bus', 'mac', 'username']) t.notOk(text.includes(`"${key}"`), `no "${key}" field`);
  t.notOk(res.stdout.includes('1563621004560'), 'no GPU board serial from the XML');
});

t.test('behavior: simulated mode reports the given GPUs marked simulated, offered without nvidia-smi', async (t) => {
  const stateDir = mkdtempSync(join(tmpdir(), 'gf-agent-inv-'));
  t.teardown(() => rmSync(stateDir, { recursive: true, force: true }));
  const res = await gfAgent(['inventory', '--wire'], { GF_AGENT_STATE_DIR: stateDir, GF_AGENT_SIMULATE_GPUS: '2x h100-80gb-sxm, 1x l4-24gb' });
  t.equal(res.code, 0, res.stderr);
  const inv = JSON.parse(res.stdout) as Printed & { simulated: boolean };
  t.equal(inv.simulated, true);
  t.same(inv.gpus.map((g) => [g.classId, g.simulated]), [['h100-80gb-sxm', true], ['h100-80gb-sxm', true], ['l4-24gb', true]]);
  t.equal(inv.health.status, 'healthy');
  t.equal(inv.health.gpuProbe, 'simulated');
});

t.test('error: a bad setting is named with where it came from', async (t) => {
  const stateDir = mkdtempSync(join(tmpdir(), 'gf-agent-inv-'));
  t.teardown(() => rmSync(stateDir, { recursive: true, force: true }));
  const res = await gfAgent(['inventory', '--simulate-gpus', '3x h200'], { GF_AGENT_STATE_DIR: stateDir, GF_AGENT_HEARTBEAT_INTERVAL_SECONDS: 'often' });
  t.equal(res.code, 2);
  t.match(res.stderr, /configuration error/);
  t.match(res.stderr, /environment GF_AGENT_HEARTBEAT_INTERVAL_SECONDS: must be a whole number/);
  t.match(res.stderr, /option --simulate-gpus: must be COUNTx CLASS/);
});

t.test('behavior: a driver that stopped answering leaves the machine unhealthy with the reason', async (t) => {
  const smi = fakeNvidiaSmi('l4');
  t.teardown(smi.cleanup);
  smi.breakDriver();
  const stateDir = mkdtempSync(join(tmpdir(), 'gf-agent-inv-'));
  t.teardown(() => rmSync(stateDir, { recursive: true, force: true }));
  const res = await gfAgent(['inventory'], { PATH: smi.path, GF_AGENT_STATE_DIR: stateDir });
  t.equal(res.code, 0, res.stderr);
  const inv = JSON.parse(res.stdout) as Printed;
  t.equal(inv.gpus.length, 0);
  t.equal(inv.health.status, 'unhealthy');
  t.match(inv.health.reason, /couldn't communicate with the NVIDIA driver/);
});
