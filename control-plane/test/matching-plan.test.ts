import t from 'tap';
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
  return { jobId: 'job', gpuCount: 1, minVramBytes: null, classIds: null, capMicroUsd: 10_000_000, workloadType: 'custom', regionPreference: null, excludedMachines: new Set(), provenOnly: false, ...n };
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
