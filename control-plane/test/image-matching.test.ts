import { AGENT_PROTOCOL_VERSIONS, type ImageCacheReport } from '@gpufarm/shared';
import t from 'tap';
import { writeImageReport } from '../src/agent-gateway/image-store.js';
import type { Database } from '../src/db/database.js';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { createJobOwner, createQueuedJobs } from '../src/testing/job-factories.js';
import { matchQueuedJobs } from '../src/matching/matcher.js';
import { bearer, createTestKey } from './helpers/app.js';
import { BACKENDS } from './helpers/database.js';
import { AgentSocket, enrollMachine, heartbeat, hello, startGatewayApp, testInventory, type GatewayTestApp } from './helpers/agent-client.js';

/**
 * Image-aware matching end to end on the control plane (issue 34): scripted agents report the
 * images they hold in their heartbeats (protocol 8), the gateway stores the latest report, the
 * matcher prefers the holder among equal offers, and a job's estimate says the image is cached.
 */

const GiB = 1024 ** 3;
const digest = (c: string) => `sha256:${c.repeat(64)}`;
const PINNED = `ghcr.io/acme/train@${digest('d')}`;

/** A report holding `names` as one image of the layers `layers` (`[hex char, GiB]`). */
function report(names: string[], layers: Array<[string, number]> = [['a', 4], ['b', 2]]): ImageCacheReport {
  return {
    budgetBytes: 100 * GiB,
    usedBytes: layers.reduce((n, [, g]) => n + g * GiB, 0),
    images: [{ id: digest('e'), repoDigests: names.filter((n) => n.includes('@')), repoTags: names.filter((n) => !n.includes('@')), layers: layers.map((_, i) => i), lastUsedAt: new Date().toISOString() }],
    layers: layers.map(([c, g]) => ({ digest: digest(c), sizeBytes: g * GiB })),
    omitted: 0,
  };
}

/** The machine's scripted agent, linked and welcomed (speaking only `versions` when given). */
async function link(t: Teardown, s: GatewayTestApp, machineToken: string, versions?: number[]): Promise<AgentSocket> {
  const agent = await AgentSocket.connect(s.url, machineToken);
  t.teardown(() => agent.close());
  agent.send(hello(testInventory({ gpus: 1 }), [], versions ? { supportedVersions: versions, protocolVersion: Math.max(...versions) } : {}));
  await agent.next('welcome');
  return agent;
}

/** A machine of one GPU enrolled through the API, its agent linked. */
async function linkedMachine(t: Teardown, s: GatewayTestApp): Promise<{ machineId: string; machineToken: string; agent: AgentSocket }> {
  const { machineId, machineToken } = await enrollMachine(s.app, s.db, testInventory({ gpus: 1 }));
  return { machineId, machineToken, agent: await link(t, s, machineToken) };
}

interface Teardown {
  teardown(fn: () => unknown): void;
}

async function storedNames(db: Database, machineId: string): Promise<string[] | null> {
  const [row] = await db.query<{ image_names: string[] }>('SELECT image_names FROM machine_images WHERE machine_id = $1', [machineId]);
  return row?.image_names ?? null;
}

t.test('gateway: a heartbeat\'s images are stored, kept while later heartbeats carry none, replaced by the next report', async (t) => {
  const s = await startGatewayApp(t);
  const { machineId, agent } = await linkedMachine(t, s);
  agent.send(heartbeat());
  await agent.barrier();
  t.equal(await storedNames(s.db, machineId), null, 'no report yet: nothing stored');

  agent.send(heartbeat({ images: report([PINNED, 'docker.io/library/ubuntu:22.04']) }));
  await agent.barrier();
  t.same(await storedNames(s.db, machineId), [PINNED, 'ubuntu:22.04'], 'names reduced as matching compares them');
  const [row] = await s.db.query<{ layer_digests: string[]; used_bytes: string; report: ImageCacheReport }>('SELECT layer_digests, used_bytes, report FROM machine_images WHERE machine_id = $1', [machineId]);
  t.same(row!.layer_digests, [digest('a'), digest('b')]);
  t.equal(Number(row!.used_bytes), 6 * GiB);
  t.equal(row!.report.images[0]!.repoTags[0], 'docker.io/library/ubuntu:22.04', 'the report as received');

  agent.send(heartbeat());
  await agent.barrier();
  t.same(await storedNames(s.db, machineId), [PINNED, 'ubuntu:22.04'], 'absent: unchanged');

  agent.send(heartbeat({ images: report(['busybox:1.36'], [['c', 1]]) }));
  await agent.barrier();
  t.same(await storedNames(s.db, machineId), ['busybox:1.36'], 'a later report replaces the whole of it');
});

t.test('gateway: an agent on a protocol before 8 has its stored report forgotten, and none it sends is stored', async (t) => {
  const s = await startGatewayApp(t);
  const { machineId, machineToken, agent } = await linkedMachine(t, s);
  agent.send(heartbeat({ images: report(['busybox:1.36']) }));
  await agent.barrier();
  t.same(await storedNames(s.db, machineId), ['busybox:1.36']);
  agent.close();
  await agent.closed;
  const older = await link(t, s, machineToken, AGENT_PROTOCOL_VERSIONS.filter((v) => v < 8));
  t.equal(await storedNames(s.db, machineId), null, 'forgotten at hello');
  older.send(heartbeat({ images: report(['busybox:1.36']) }));
  await older.barrier();
  t.equal(await storedNames(s.db, machineId), null, 'a field of 8 on a link that chose 7 is not stored');
});

t.test('matcher: a job lands on the machine whose agent reported its image when another fits equally', async (t) => {
  const s = await startGatewayApp(t);
  const first = await linkedMachine(t, s);
  const second = await linkedMachine(t, s);
  const third = await linkedMachine(t, s);
  await s.db.query(`UPDATE machines SET verification = 'verified' WHERE id = ANY($1::text[])`, [[first.machineId, second.machineId, third.machineId]]);
  // The tie-break without images goes by machine id: the holder is the one it would not pick.
  const [byId, holder, partial] = [first, second, third].sort((a, b) => (a.machineId < b.machineId ? -1 : 1));
  holder!.agent.send(heartbeat({ images: report([PINNED], [['a', 4], ['b', 2]]) }));
  await holder!.agent.barrier();
  partial!.agent.send(heartbeat({ images: report(['ghcr.io/acme/base:1'], [['a', 4]]) }));
  await partial!.agent.barrier();
  // The heartbeats above counted their machines' seconds since hello as uptime, which ranks before
  // the id: whole seconds on a loaded machine. The three start even, so only images break the tie.
  await s.db.query('DELETE FROM machine_uptime_days WHERE machine_id = ANY($1::text[])', [[first.machineId, second.machineId, third.machineId]]);

  const owner = await createJobOwner(s.db);
  const [other, pinned, tagged, base] = await createQueuedJobs(s.db, owner, [
    { spec: { image: 'ghcr.io/acme/unknown:1' } },
    { spec: { image: PINNED } },
    { spec: { image: 'ghcr.io/acme/base' } },
    { spec: { image: 'ghcr.io/acme/train', imageDigest: digest('d') } },
  ]);
  const result = await matchQueuedJobs({ db: s.db }, { allowSimulated: true, batchSize: 1 });
  const landed = new Map(result.matched.map((m) => [m.jobId, m.machineId]));
  t.equal(landed.get(other!), byId!.machineId, 'an image nobody holds: the usual tie-break');
  t.equal(landed.get(pinned!), holder!.machineId, 'the pinned image goes to its holder');
  t.equal(landed.get(tagged!), partial!.machineId, 'an unpinned name (latest) matched by repo:tag');
  t.equal(landed.get(base!), undefined, 'three machines, three jobs: the fourth waits');

  // The holder is free again: the fourth job (the same image, pinned through imageDigest) goes there, not to the partial holder.
  await s.db.query(`UPDATE machine_gpus SET busy = false, assignment_id = NULL WHERE machine_id = ANY($1::text[])`, [[holder!.machineId, partial!.machineId]]);
  const again = await matchQueuedJobs({ db: s.db }, { allowSimulated: true });
  t.same(again.matched.map((m) => [m.jobId, m.machineId]), [[base!, holder!.machineId]]);
});

t.test('matcher: the holder is not taken when it is dearer than an equal machine or than the cap', async (t) => {
  const s = await startGatewayApp(t);
  const cheap = await linkedMachine(t, s);
  const dear = await linkedMachine(t, s);
  await s.db.query(`UPDATE machines SET verification = 'verified', price_per_gpu_hour_micro_usd = CASE WHEN id = $1 THEN 450000 ELSE 460000 END WHERE id = ANY($2::text[])`, [
    cheap.machineId,
    [cheap.machineId, dear.machineId],
  ]);
  dear.agent.send(heartbeat({ images: report([PINNED]) }));
  await dear.agent.barrier();
  const owner = await createJobOwner(s.db);
  const [first, capped] = await createQueuedJobs(s.db, owner, [{ spec: { image: PINNED } }, { spec: { image: PINNED }, capMicroUsd: 455_000 }]);
  const result = await matchQueuedJobs({ db: s.db }, { allowSimulated: true });
  t.same(
    result.matched.map((m) => [m.jobId, m.machineId]),
    [[first!, cheap.machineId]],
    'the cheaper machine, though the dearer one holds the image; the capped job does not take the dearer holder',
  );
  t.equal(result.matched.some((m) => m.jobId === capped), false);
});

t.test('estimate: the assumptions say on how many online machines the image is cached', async (t) => {
  const s = await startGatewayApp(t);
  const a = await linkedMachine(t, s);
  const b = await linkedMachine(t, s);
  for (const m of [a, b]) {
    m.agent.send(heartbeat({ images: report([PINNED, 'ghcr.io/acme/train:2', 'ghcr.io/acme/train:stable']) }));
    await m.agent.barrier();
  }
  const key = await createTestKey(s.db);
  const create = async (image: string) => {
    const res = await s.app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key.key), payload: { image, gpu: { count: 1 }, maxPricePerGpuHour: '2.00' } });
    t.equal(res.statusCode, 201, 'created');
    return (res.json() as { estimate: { assumptions: string[] } }).estimate.assumptions;
  };
  t.match((await create(PINNED)).at(-1), /^the image is cached on 2 machines of the market now; among equally good offers the matcher prefers one that holds it/);
  t.match((await create('ghcr.io/acme/train:2')).at(-1), /cached on 2 machines/, 'by tag');
  t.notOk((await create('ghcr.io/acme/train:3')).some((line) => line.includes('cached')), 'an image no machine holds: nothing said');
  // Counted once per image for a few seconds: a machine gone offline counts no more for an image asked next.
  await s.db.query(`UPDATE machines SET status = 'offline' WHERE id = $1`, [b.machineId]);
  t.match((await create('ghcr.io/acme/train:stable')).at(-1), /cached on 1 machine of the market/, 'online machines only');
});

for (const [backend, open] of BACKENDS) {
  t.test(`store (${backend}): the matcher reads the stored reports: the exact holder, then the most shared layers, then none`, async (t) => {
    const { db } = await open(t);
    const farm = await createFarm(db, { slug: `images-${backend}` });
    const machines: string[] = [];
    for (let i = 0; i < 3; i++) machines.push((await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'a100-80gb', gpuCount: 1, pricePerGpuHourMicroUsd: 1_000_000 })).id);
    await db.query(`UPDATE machine_gpus SET uuid = 'GPU-' || md5(machine_id || ':' || gpu_index)`);
    await db.query('UPDATE machines SET token_hash = md5(id)');
    const [none, some, all] = machines.sort();
    await writeImageReport(db, all!, report([PINNED], [['a', 4], ['b', 2]]));
    await writeImageReport(db, some!, report(['other:1'], [['a', 4], ['c', 1]]));
    const owner = await createJobOwner(db);
    const ids = await createQueuedJobs(db, owner, [{ spec: { image: PINNED } }, { spec: { image: PINNED } }, { spec: { image: PINNED } }]);
    const result = await matchQueuedJobs({ db });
    t.same(
      result.matched.map((m) => [m.jobId, m.machineId]),
      [
        [ids[0], all],
        [ids[1], some],
        [ids[2], none],
      ],
    );
    // A newer report replaces the one the matcher read before: the second machine now holds the
    // image itself and wins the tie by its id; read as it was (a layer of it), it would lose.
    await db.query('UPDATE machine_gpus SET busy = false, assignment_id = NULL');
    await writeImageReport(db, some!, report([PINNED], [['a', 4], ['b', 2]]));
    const [moved] = await createQueuedJobs(db, owner, [{ spec: { image: PINNED } }]);
    t.same((await matchQueuedJobs({ db })).matched.map((m) => [m.jobId, m.machineId]), [[moved, some]], 'the matcher follows the newer report');
  });
}
