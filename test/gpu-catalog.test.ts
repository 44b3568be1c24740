import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { capacityListSchema, errorEnvelopeSchema, findGpuClass, GPU_CLASSES, pricingSchema } from '@gpufarm/shared';
import { AgentDaemon, InventoryMonitor, nvidiaSmiReader, rejectingRunner, silentLog, systemHostReader, toWireInventory } from '@gpufarm/agent';
import { CURATED_CARDS, fakeNvidiaSmi, machineXml, type FakeNvidiaSmi, type Fixture } from '@gpufarm/agent/testing/fake-nvidia-smi';
import { enrollMachine, startGatewayApp } from '@gpufarm/control-plane/testing/agent-client';
import { bearer, createTestKey } from '@gpufarm/control-plane/testing/app';
import { devWallet, fakeWebDist, PUBLIC_URL, session, signIn } from '@gpufarm/control-plane/testing/web';
import { until } from './helpers/wait.js';

/**
 * The open GPU catalog end to end in one process: one control plane (gateway, offer index,
 * capacity, pricing, jobs and the operator area on PostgreSQL) and a real agent daemon per
 * machine on its own fake `nvidia-smi`. One machine per generation holds a card of every
 * curated class of that generation (`CURATED_CARDS`: copies of the generation's recorded GPU with
 * each card's product name, memory, PCI device id and compute capability), and single-card
 * machines bring the recorded B200
 * that an older driver names "Graphics Device", an RTX A2000 12GB no class lists and a Pascal
 * GTX 1080 Ti.
 */

t.setTimeout(600_000);

const operator = devWallet(1);

/** The recorded single-card fixture each generation's machine is made from (its driver branch and element layout), by `product_architecture`. */
const TEMPLATES: Record<string, Fixture> = { Turing: 't4', Ampere: 'rtx-3060', 'Ada Lovelace': 'rtx-4000-sff-ada', Hopper: 'h100-80gb-hbm3', Blackwell: 'rtx-5090' };

t.test('a card of each curated class, a derived class and a Pascal card through the real agent and control plane', async (t) => {
  const cp = await startGatewayApp(t, { env: { GF_HEARTBEAT_SECONDS: '1', GF_PUBLIC_URL: PUBLIC_URL, GF_WEB_DIR: fakeWebDist(t) } });

  /** An enrolled, verified agent daemon on its own fake nvidia-smi, serving what `serve` sets. */
  const linkedAgent = async (t: Test, serve: (smi: FakeNvidiaSmi) => void): Promise<string> => {
    const smi = fakeNvidiaSmi('t4');
    t.teardown(smi.cleanup);
    serve(smi);
    const dir = mkdtempSync(join(tmpdir(), 'gf-catalog-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const inventory = new InventoryMonitor(
      { gpus: nvidiaSmiReader({ command: join(smi.binDir, 'nvidia-smi') }), host: systemHostReader(dir), probe: smi.probe, now: () => new Date() },
      { agentVersion: '0.0.0-test', simulate: null, hostRefreshMs: 60_000, probeIntervalMs: 600_000, probeRetryMs: 600_000 },
    );
    const first = await inventory.refresh();
    t.equal(first.health.status, 'healthy', first.health.reason ?? '');
    const { machineId, machineToken } = await enrollMachine(cp.app, cp.db, toWireInventory(first));
    // The GPU challenge is another slice's test: these machines start verified.
    await cp.db.query(`UPDATE machines SET verification = 'verified' WHERE id = $1`, [machineId]);
    const daemon = new AgentDaemon(
      { inventory, runner: rejectingRunner(), benchmark: () => null, log: silentLog },
      { server: cp.url, machineToken, agentVersion: '0.0.0-test', spoolDir: join(dir, 'spool'), logMemoryBytes: 1 << 20, heartbeatIntervalSeconds: 1, inventoryIntervalSeconds: 5, reconnect: { initialMs: 20, maxMs: 200 } },
    );
    t.teardown(() => daemon.stop());
    await daemon.start();
    return machineId;
  };

  t.same(GPU_CLASSES.map((c) => c.classId).filter((id) => !CURATED_CARDS[id]), [], 'a card for every curated class');
  const generations = Object.keys(TEMPLATES);
  for (const generation of generations) {
    const cards = Object.values(CURATED_CARDS).filter((c) => c.architecture === generation);
    await linkedAgent(t, (smi) => smi.useXml(machineXml(TEMPLATES[generation]!, cards), cards.map((c) => c.computeCap)));
  }
  const graphicsDevice = await linkedAgent(t, (smi) => smi.use('b200-graphics-device-driver-570.86'));
  const unknown = await linkedAgent(t, (smi) => smi.use('rtx-a2000-12gb'));
  const pascal = await linkedAgent(t, (smi) => smi.use('gtx-1080-ti'));

  // Each public request from an address of its own: the anonymous rate limit counts per address.
  let address = 0;
  const get = async (url: string) => cp.app.inject({ method: 'GET', url, remoteAddress: `10.29.${(++address >> 8) & 255}.${address & 255}` });
  const derivedId = 'derived-nvidia-rtx-a2000-12gb';
  await until(async () => {
    const online = await cp.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM machines WHERE status = 'online'`);
    return online[0]?.n === generations.length + 3;
  }, 'every machine online');
  await cp.offerIndex.refresh();

  await t.test('capacity: model= finds each curated class, offered as that class', async (t) => {
    for (const [classId, card] of Object.entries(CURATED_CARDS)) {
      const res = await get(`/v1/capacity?model=${classId}`);
      t.equal(res.statusCode, 200, res.body);
      const offers = res.statusCode === 200 ? capacityListSchema.parse(res.json()).data : [];
      t.ok(offers.length >= 1, `${card.name} offered as ${classId}`);
      t.ok(offers.every((o) => o.gpu.classId === classId && o.gpu.model === findGpuClass(classId)?.model), `${classId}: every offer is of the class`);
    }
    const b200 = capacityListSchema.parse((await get('/v1/capacity?model=b200-180gb')).json()).data;
    t.equal(b200.length, 2, 'the B200 its driver calls "Graphics Device" is a B200 too (told by its PCI device id)');
  });

  await t.test('capacity and pricing: the card no class lists is offered as its derived class', async (t) => {
    const offers = capacityListSchema.parse((await get(`/v1/capacity?model=${derivedId}`)).json()).data;
    t.equal(offers.length, 1);
    t.match(offers[0], { gpu: { classId: derivedId, label: 'RTX A2000 12GB', model: 'NVIDIA RTX A2000 12GB', vendor: 'nvidia', family: 'workstation', vramBytes: 12 * 1024 ** 3, driverVersion: '545.29.06' }, count: 1, available: 1 });
    const all = capacityListSchema.parse((await get('/v1/capacity?limit=500')).json()).data;
    t.ok(all.some((o) => o.gpu.classId === derivedId), 'in the unfiltered list too');
    t.ok(capacityListSchema.parse((await get('/v1/capacity?minVram=12&limit=500')).json()).data.some((o) => o.gpu.classId === derivedId), 'and by memory');

    const pricing = pricingSchema.parse((await get('/v1/pricing')).json());
    t.same(pricing.classes.slice(0, GPU_CLASSES.length).map((c) => c.classId), GPU_CLASSES.map((c) => c.classId), 'every curated class, in catalog order');
    for (const classId of Object.keys(CURATED_CARDS)) t.ok((pricing.classes.find((c) => c.classId === classId)?.gpusOnline ?? 0) >= 1, `${classId}: GPUs online`);
    t.match(pricing.classes.find((c) => c.classId === derivedId), { label: 'RTX A2000 12GB', family: 'workstation', vramBytes: 12 * 1024 ** 3, gpusOnline: 1, gpusAvailable: 1, gpusPriced: 1, minPerGpuHourMicroUsd: 450_000 });
    t.notOk(pricing.classes.some((c) => /gtx-1080/.test(c.classId)), 'no class for the Pascal card');

    const [row] = await cp.db.query<{ origin: string; architecture: string; figure_source: string }>('SELECT origin, architecture, figure_source FROM gpu_classes WHERE class_id = $1', [derivedId]);
    t.match(row, { origin: 'derived', architecture: 'ampere', figure_source: /^derived class: .*Ampere floor/ }, 'synced into gpu_classes when the machine reported it');

    const unknownModel = await get('/v1/capacity?model=derived-nvidia-never-seen-8gb');
    t.equal(unknownModel.statusCode, 400);
    t.same(errorEnvelopeSchema.parse(unknownModel.json()).error.details.map((d) => d.field), ['model'], 'a derived id no machine reported names no class');
  });

  await t.test('jobs: modelAllowlist takes a derived class', async (t) => {
    const key = await createTestKey(cp.db);
    const post = (modelAllowlist: string[]) =>
      cp.app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key.key), payload: { image: 'ghcr.io/acme/trainer:1.4', gpu: { count: 1, modelAllowlist }, maxRuntimeSeconds: 600, paymentToken: 'eth' } });
    const created = await post([derivedId]);
    t.equal(created.statusCode, 201, created.body);
    t.same(created.json().estimate.matchedClasses, [derivedId]);
    const refused = await post(['derived-nvidia-never-seen-8gb']);
    t.equal(refused.statusCode, 422, refused.body);
    t.same(errorEnvelopeSchema.parse(refused.json()).error.details.map((d) => d.field), ['gpu.modelAllowlist[0]']);
  });

  await t.test('operator area: the Pascal card is not offered, and says why; the unnamed B200 is told its driver is too old', async (t) => {
    await cp.db.query(`INSERT INTO farm_operators (farm_id, wallet_address) SELECT farm_id, $2 FROM machines WHERE id = ANY($1::text[])`, [[pascal, graphicsDevice, unknown], operator.address.toLowerCase()]);
    const me = await signIn(cp.app, operator);
    const res = await cp.app.inject({ url: `/operator/api/machines/${pascal}`, headers: session(me) });
    t.equal(res.statusCode, 200, res.body);
    const reason = 'compute capability 6.1 (Pascal) is older than 7.5 (Turing), the oldest offered: CUDA 13 and the benchmark do not support it';
    t.match(res.json().machine, {
      gpus: [],
      notOfferedGpus: [{ index: 0, name: 'NVIDIA GeForce GTX 1080 Ti', reason }],
      earning: { earning: false, code: 'unhealthy', reason: `No GPU is offered: GPU 0 (NVIDIA GeForce GTX 1080 Ti): ${reason}.`, fix: /compute capability 7\.5 \(Turing\) or newer/ },
    });
    t.equal(capacityListSchema.parse((await get('/v1/capacity?limit=500')).json()).data.filter((o) => o.farm.slug === res.json().machine.farm.slug).length, 0, 'nothing of its farm is offered');

    const b200 = (await cp.app.inject({ url: `/operator/api/machines/${graphicsDevice}`, headers: session(me) })).json().machine;
    t.match(b200, { gpus: [{ classId: 'b200-180gb', label: 'B200 180GB' }], notOfferedGpus: [], earning: { code: 'driver_too_old', reason: 'Driver too old: 570.86.15 is below 570.133.20, the oldest offered for B200 180GB.' } });
    const derived = (await cp.app.inject({ url: `/operator/api/machines/${unknown}`, headers: session(me) })).json().machine;
    t.match(derived, { gpus: [{ classId: derivedId, label: 'RTX A2000 12GB' }], earning: { code: 'offered', reason: /going price for RTX A2000 12GB is / } });
  });
});
