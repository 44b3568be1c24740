import { join } from 'node:path';
import { AGENT_PROTOCOL_VERSION } from '@gpufarm/shared';
import t from 'tap';
import { fakeNvidiaSmi } from './helpers/fake-nvidia-smi.js';
import { TestPeer } from './helpers/peer.js';
import { testDaemon } from './helpers/daemon.js';

t.test('behavior: GPU count, model and driver changes reach the control plane in heartbeats', async (t) => {
  const smi = fakeNvidiaSmi('h100-80gb-hbm3');
  t.teardown(smi.cleanup);
  const peer = await TestPeer.start({ heartbeatIntervalSeconds: 1 });
  t.teardown(() => peer.close());
  const { machineToken } = peer.addMachine('m_inv');
  const agent = testDaemon({ server: peer.url, machineToken, nvidiaSmi: join(smi.binDir, 'nvidia-smi'), daemon: { inventoryIntervalSeconds: 1 } });
  t.teardown(agent.cleanup);
  await agent.daemon.start();
  await peer.waitFor(() => peer.messages('hello').length === 1, 'hello');

  const hello = peer.messages('hello')[0]!;
  t.equal(hello.protocolVersion, AGENT_PROTOCOL_VERSION);
  t.equal(hello.inventory.detectedGpuCount, 1);
  t.equal(hello.inventory.driverVersion, '535.129.03');
  t.equal(hello.inventory.health.status, 'unhealthy', 'no container has seen the GPU: not offered');
  t.equal(hello.inventory.health.gpuProbe, 'failed');
  t.match(hello.inventory.health.reason, /probe image .* is not on this machine/);
  t.same(hello.inventory.gpus, [], 'an unhealthy machine lists no GPU');

  await peer.waitFor(() => peer.messages('heartbeat').length >= 1, 'a heartbeat');
  t.equal(peer.messages('heartbeat')[0]!.inventory, null, 'an unchanged inventory is not sent again');

  const changes: Array<{ name: string; apply: () => void; seen: (inv: NonNullable<ReturnType<typeof peer.messages<'heartbeat'>>[number]['inventory']>) => boolean }> = [
    { name: 'GPU count and model (8x A100 80GB)', apply: () => smi.use('8x-a100-sxm4-80gb'), seen: (inv) => inv.detectedGpuCount === 8 && inv.driverVersion === '525.85.12' },
    { name: 'driver upgrade (550.54.15)', apply: () => smi.use('h100-80gb-hbm3-driver-550'), seen: (inv) => inv.detectedGpuCount === 1 && inv.driverVersion === '550.54.15' && inv.cudaVersion === '12.4' },
    { name: 'driver gone', apply: () => smi.breakDriver(), seen: (inv) => inv.detectedGpuCount === 0 && /couldn't communicate with the NVIDIA driver/.test(inv.health.reason ?? '') },
  ];
  for (const change of changes) {
    const before = peer.messages('heartbeat').length;
    change.apply();
    await peer.waitFor(() => peer.messages('heartbeat').slice(before).some((h) => h.inventory !== null && change.seen(h.inventory)), change.name);
    const after = peer.messages('heartbeat').slice(before);
    const at = after.findIndex((h) => h.inventory !== null && change.seen(h.inventory));
    t.pass(`${change.name}: in heartbeat ${at + 1} after the change`);
  }
  const last = peer.messages('heartbeat').at(-1)!;
  t.equal(last.health.status, 'unhealthy');
  t.same(last.gpus, []);
  t.equal(peer.invalid.length, 0, 'every message passed the schemas');
});
