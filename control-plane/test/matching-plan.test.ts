import t from 'tap';
import { imageHoldings } from '../src/matching/image-holdings.js';
import { CandidatePool, compareUnits, regionTiers, type CandidateMachine, type CandidateUnit, type JobNeed } from '../src/matching/plan.js';

const GiB = 1024 ** 3;

function unit(id: string, m: Partial<CandidateMachine> = {}, u: { classId?: string; free?: number[]; vram?: number } = {}): CandidateUnit {
  return {
    machine: { id, farmName: 'F', regionKey: 'us-east', priceMicroUsd: 1_000_000, tierRank: 3, uptimeCentiPct: 9_900, workloads: null, proven: true, ...m },
    classId: u.classId ?? 'a100-80gb',
    free: (u.free ?? [0]).map((index) => ({ index, uuid: `GPU-${id}-${index}`, vramBytes: u.vram ?? 80 * GiB })),
  };
}

function need(n: Partial<JobNeed> = {}): JobNeed {
  return { jobId: 'job', gpuCount: 1, minVramBytes: null, classIds: null, capMicroUsd: 10_000_000, workloadType: 'custom', regionPreference: null, excludedMachines: new Set(), provenOnly: false, imageKey: null, ...n };
}

t.test('regionTiers: the key, then its group, then the rest; no preference is one tier', async (t) => {
  const keys = ['us-east', 'europe-west', 'europe-central', 'asia-east'];
  t.same(regionTiers('europe-west', keys), [['europe-west'], ['europe-central'], ['us-east', 'asia-east']]);
  t.same(regionTiers('europe-north', keys), [['europe-north'], ['europe-west', 'europe-central'], ['us-east', 'asia-east']]);
  t.same(regionTiers('Europe', keys), [['europe-west', 'europe-central', 'europe-north'], ['us-east', 'asia-east']], 'a group name');
  t.same(regionTiers('mars', keys), [keys], 'unknown: no preference');
  t.same(regionTiers(null, keys), [keys]);
});

t.test('compareUnits: price, then tier, then uptime, then machine id, then class', async (t) => {
  const sorted = (units: CandidateUnit[]) => [...units].sort(compareUnits).map((u) => `${u.machine.id}/${u.classId}`);
  t.same(sorted([unit('b', { priceMicroUsd: 2 }), unit('a', { priceMicroUsd: 3 })]), ['b/a100-80gb', 'a/a100-80gb']);
  t.same(sorted([unit('a', { tierRank: 2 }), unit('b', { tierRank: 4 })]), ['b/a100-80gb', 'a/a100-80gb']);
  t.same(sorted([unit('a', { uptimeCentiPct: 9_000 }), unit('b', { uptimeCentiPct: 9_500 })]), ['b/a100-80gb', 'a/a100-80gb']);
  t.same(sorted([unit('b'), unit('a')]), ['a/a100-80gb', 'b/a100-80gb']);
  t.same(sorted([unit('a', {}, { classId: 'l4-24gb' }), unit('a')]), ['a/a100-80gb', 'a/l4-24gb']);
});

t.test('CandidatePool: takes the lowest free indices, skips what does not fit, gives back', async (t) => {
  const big = unit('big', { priceMicroUsd: 2_000_000 }, { free: [5, 1, 3].sort((a, b) => a - b) });
  const small = unit('small', { priceMicroUsd: 500_000 }, { free: [0], classId: 'rtx-4090-24gb', vram: 24 * GiB });
  const pool = new CandidatePool([big, small]);
  t.equal(pool.freeGpus, 4);

  t.equal(pool.take(need({ gpuCount: 4 })), null, 'count: no machine has 4 free');
  t.equal(pool.take(need({ capMicroUsd: 400_000 })), null, 'cap');
  t.equal(pool.take(need({ classIds: ['h100-80gb-sxm'] })), null, 'allowlist');
  t.equal(pool.take(need({ excludedMachines: new Set(['big', 'small']) })), null, 'exclusions');
  t.equal(pool.take(need({ minVramBytes: 100 * GiB })), null, 'VRAM');

  const vram = pool.take(need({ minVramBytes: 40 * GiB }))!;
  t.equal(vram.unit.machine.id, 'big', 'the cheap 24 GB card is too small');
  t.same(vram.gpus.map((g) => g.index), [1]);
  const cheap = pool.take(need())!;
  t.equal(cheap.unit.machine.id, 'small');
  t.equal(pool.take(need({ gpuCount: 3 })), null, 'big has 2 left');
  const two = pool.take(need({ gpuCount: 2 }))!;
  t.same(two.gpus.map((g) => g.index), [3, 5]);
  t.equal(pool.freeGpus, 0);
  t.equal(pool.take(need()), null);

  pool.giveBack(two.unit, [two.gpus[1]!]);
  t.same(pool.take(need())!.gpus.map((g) => g.index), [5], 'a GPU given back is found again');
});

t.test('CandidatePool: workload types and region preference', async (t) => {
  const pool = new CandidatePool([
    unit('eu', { regionKey: 'europe-central', priceMicroUsd: 900_000 }),
    unit('us', { regionKey: 'us-east', priceMicroUsd: 100_000, workloads: new Set(['inference']) }),
    unit('us2', { regionKey: 'us-west', priceMicroUsd: 200_000 }),
  ]);
  t.equal(pool.take(need({ regionPreference: 'europe-west', workloadType: 'custom' }))!.unit.machine.id, 'eu', 'group before price');
  t.equal(pool.take(need({ workloadType: 'custom' }))!.unit.machine.id, 'us2', 'the cheaper machine takes inference only');
  t.equal(pool.take(need({ workloadType: 'inference' }))!.unit.machine.id, 'us');
});

t.test('CandidatePool: gpu.proven takes only machines that proved their GPUs, even when a cheaper one did not', async (t) => {
  const pool = new CandidatePool([unit('cheap', { priceMicroUsd: 100_000, proven: false }), unit('proven', { priceMicroUsd: 900_000 }), unit('other', { priceMicroUsd: 200_000, proven: false })]);
  t.equal(pool.take(need({ provenOnly: true }))!.unit.machine.id, 'proven');
  t.equal(pool.take(need({ provenOnly: true })), null, 'no proven GPU left');
  t.equal(pool.take(need())!.unit.machine.id, 'cheap', 'without it, any machine');
});

/** A pool that knows `holdings` of the image `img:1` (machine id → bytes held, exact when the whole image). */
function poolHolding(units: CandidateUnit[], holdings: Record<string, { bytes: number; exact?: boolean }>): CandidatePool {
  const pool = new CandidatePool(units);
  const held = new Map(Object.entries(holdings).map(([id, h]) => [id, { bytes: h.bytes, exact: h.exact ?? false }]));
  pool.addImageHoldings(['img:1', 'other:1'], new Map([['img:1', held]]));
  return pool;
}
const withImage = (n: Partial<JobNeed> = {}) => need({ imageKey: 'img:1', ...n });

t.test('image: among equal offers the machine holding the image wins, before tier and uptime', async (t) => {
  // Taking GPUs changes the units: each pool gets its own.
  const units = () => [unit('a', { tierRank: 4, uptimeCentiPct: 9_999 }), unit('b', { tierRank: 1, uptimeCentiPct: 8_000 }), unit('c')];
  t.equal(poolHolding(units(), { b: { bytes: 10 * GiB, exact: true } }).take(withImage())!.unit.machine.id, 'b');
  t.equal(poolHolding(units(), {}).take(withImage())!.unit.machine.id, 'a', 'nobody holds it: tier first as before');
  t.equal(poolHolding(units(), { b: { bytes: 10 * GiB, exact: true } }).take(need({ imageKey: 'other:1' }))!.unit.machine.id, 'a', 'another image held by none');
  t.equal(poolHolding(units(), { b: { bytes: 10 * GiB, exact: true } }).take(need())!.unit.machine.id, 'a', 'a job without an image key');
});

t.test('image: never a dearer machine, nor one above the cap, nor a farther region', async (t) => {
  const cheap = unit('cheap', { priceMicroUsd: 1_000_000 });
  const dear = unit('dear', { priceMicroUsd: 1_001_000 });
  t.equal(poolHolding([cheap, dear], { dear: { bytes: 10 * GiB, exact: true } }).take(withImage())!.unit.machine.id, 'cheap', 'dearer than an equal machine');
  const capped = poolHolding([unit('under', { priceMicroUsd: 900_000, tierRank: 1 }), unit('over', { priceMicroUsd: 1_100_000 })], { over: { bytes: 10 * GiB, exact: true } });
  t.equal(capped.take(withImage({ capMicroUsd: 1_000_000 }))!.unit.machine.id, 'under', 'above the cap');
  t.equal(capped.take(withImage({ capMicroUsd: 1_000_000 })), null, 'and not when the cheap one is gone');
  const regions = poolHolding([unit('eu', { regionKey: 'europe-west' }), unit('us', { regionKey: 'us-east' })], { us: { bytes: 10 * GiB, exact: true } });
  t.equal(regions.take(withImage({ regionPreference: 'europe-west' }))!.unit.machine.id, 'eu', 'region preference first');
  t.equal(regions.take(withImage({ regionPreference: 'europe-west' }))!.unit.machine.id, 'us', 'then the next tier');
});

t.test('image: a partial overlap ranks between none and all; the holder must still fit', async (t) => {
  const units = () => [unit('none', { tierRank: 4 }), unit('some', { tierRank: 3 }), unit('all', { tierRank: 2 })];
  const holdings = { some: { bytes: 3 * GiB }, all: { bytes: 8 * GiB, exact: true } };
  const pool = poolHolding(units(), holdings);
  t.same([pool.take(withImage())!, pool.take(withImage())!, pool.take(withImage())!].map((m) => m.unit.machine.id), ['all', 'some', 'none']);
  t.equal(poolHolding(units(), { some: { bytes: 3 * GiB } }).take(withImage())!.unit.machine.id, 'some', 'some bytes beat none');
  t.equal(poolHolding(units(), { some: { bytes: 8 * GiB }, all: { bytes: 8 * GiB, exact: true } }).take(withImage())!.unit.machine.id, 'all', 'equal bytes: the exact image');
  const busy = poolHolding([unit('free'), unit('held', {}, { free: [0] })], { held: { bytes: GiB, exact: true } });
  t.equal(busy.take(withImage({ gpuCount: 2 })), null, 'neither has two GPUs');
  t.equal(busy.take(withImage({ excludedMachines: new Set(['held']) }))!.unit.machine.id, 'free', 'an excluded holder is not taken');
  t.equal(poolHolding([unit('free'), unit('held', { workloads: new Set(['inference']) })], { held: { bytes: GiB } }).take(withImage())!.unit.machine.id, 'free', 'nor one refusing the workload');
  t.equal(poolHolding([unit('free'), unit('held', {}, { classId: 'l4-24gb' })], { held: { bytes: GiB } }).take(withImage({ classIds: ['a100-80gb'] }))!.unit.machine.id, 'free', 'nor a class the job does not allow');
});

t.test('image: the holders are found past a long run of equal offers, and by walking the run when they are many', async (t) => {
  const many = Array.from({ length: 300 }, (_, i) => unit(`m${String(i).padStart(3, '0')}`));
  t.equal(poolHolding(many, { m250: { bytes: GiB } }).take(withImage())!.unit.machine.id, 'm250', 'one holder among 300 equal machines');
  const holders = Object.fromEntries(many.map((u, i) => [u.machine.id, { bytes: i === 123 ? 2 * GiB : GiB }]));
  t.equal(poolHolding(many, holders).take(withImage())!.unit.machine.id, 'm123', 'every machine holds some: the most wins');
});

t.test('image: the holder at the best price is found past its list\'s first fit and in another class\'s list', async (t) => {
  // a100 list: a0 (one GPU: no fit for two), a1 (the best, holds nothing), a2 (holds the most); h100 list: b0 (holds some).
  const units = () => [unit('a0', {}, { free: [0] }), unit('a1', {}, { free: [0, 1] }), unit('a2', { tierRank: 1 }, { free: [0, 1] }), unit('b0', {}, { classId: 'h100-80gb-sxm', free: [0, 1] })];
  const holdings = { a0: { bytes: 9 * GiB, exact: true }, a2: { bytes: 4 * GiB }, b0: { bytes: 2 * GiB } };
  t.equal(poolHolding(units(), holdings).take(withImage({ gpuCount: 2 }))!.unit.machine.id, 'a2', 'past the first fit of its list, not the holder that does not fit');
  t.equal(poolHolding(units(), { ...holdings, b0: { bytes: 6 * GiB } }).take(withImage({ gpuCount: 2 }))!.unit.machine.id, 'b0', 'in another class\'s list');
  t.equal(poolHolding(units(), { a0: { bytes: 9 * GiB, exact: true } }).take(withImage({ gpuCount: 2 }))!.unit.machine.id, 'a1', 'only a holder that does not fit: the best');
});

t.test('imageHoldings: layers learnt from the exact holder, counted on every machine, once each', async (t) => {
  const d = (c: string) => `sha256:${c.repeat(64)}`;
  const report = (images: Array<{ names: string[]; layers: number[]; at?: string }>, layers: Array<[string, number]>) => ({
    images: images.map((i) => ({ id: d('f'), repoDigests: i.names.filter((n) => n.includes('@')), repoTags: i.names.filter((n) => !n.includes('@')), layers: i.layers, lastUsedAt: i.at ?? '2026-01-01T00:00:00.000Z' })),
    layers: layers.map(([c, sizeBytes]) => ({ digest: d(c), sizeBytes })),
  });
  const held = imageHoldings(['app:1', 'missing:1'], [
    { machineId: 'exact', report: report([{ names: ['docker.io/library/app:1'], layers: [0, 1, 2] }], [['a', 100], ['b', 20], ['c', 5]]) },
    { machineId: 'base', report: report([{ names: ['base:1'], layers: [0, 1] }], [['a', 100], ['b', 20]]) },
    { machineId: 'twice', report: report([{ names: ['x:1'], layers: [0] }, { names: ['y:1'], layers: [0, 1] }], [['b', 20], ['z', 7]]) },
    { machineId: 'none', report: report([{ names: ['z:1'], layers: [0] }], [['z', 7]]) },
  ]);
  t.same([...held.keys()], ['app:1'], 'an image no machine holds by name is unknown');
  t.same(Object.fromEntries(held.get('app:1')!), { exact: { bytes: 125, exact: true }, base: { bytes: 120, exact: false }, twice: { bytes: 20, exact: false } });
});
