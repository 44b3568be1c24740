import { capacityOfferSchema, REGIONS } from '@gpufarm/shared';
import t from 'tap';
import { createOfferIndex } from '../src/capacity/offer-index.js';
import type { Database } from '../src/db/database.js';
import { mulberry32, seedFleet } from '../src/testing/seed.js';
import { BACKENDS, createPostgresTestDatabase } from './helpers/database.js';

/** The seeded fleet without its (random) ids, in a stable order. */
async function content(db: Database): Promise<string[]> {
  const rows = await db.query<Record<string, unknown>>(
    `SELECT f.slug, f.name, f.provider, m.region_key, m.status, m.price_per_gpu_hour_micro_usd, m.min_billing_seconds, m.benchmark_tier,
       m.cuda_version, m.driver_version, m.workloads, m.created_at, g.class_id, count(g.*)::int AS gpus, count(g.*) FILTER (WHERE g.busy)::int AS busy,
       (SELECT sum(seconds_up)::int FROM machine_uptime_days d WHERE d.machine_id = m.id) AS up
     FROM machines m JOIN farms f ON f.id = m.farm_id JOIN machine_gpus g ON g.machine_id = m.id
     GROUP BY f.id, m.id, g.class_id`,
  );
  return rows.map((r) => JSON.stringify(r)).sort();
}

t.test('mulberry32 is deterministic', async (t) => {
  const a = mulberry32(7);
  const b = mulberry32(7);
  const xs = Array.from({ length: 5 }, () => a());
  t.same(Array.from({ length: 5 }, () => b()), xs);
  t.ok(xs.every((x) => x >= 0 && x < 1));
  t.not(mulberry32(8)(), xs[0]);
});

for (const [backend, createDatabase] of BACKENDS) {
  t.test(`seedFleet on ${backend}`, async (t) => {
    const { db } = await createDatabase(t);
    const now = new Date();
    const result = await seedFleet(db, { machines: 400, seed: 11, now });
    t.match(result, { farms: 10, machines: 400, regions: REGIONS.length });

    const [counts] = await db.query<Record<string, number>>(
      `SELECT (SELECT count(*)::int FROM farms) AS farms, (SELECT count(*)::int FROM machines) AS machines,
         (SELECT count(*)::int FROM machine_gpus) AS gpus, (SELECT count(*)::int FROM machine_gpus WHERE busy) AS busy,
         (SELECT count(*)::int FROM machines WHERE status <> 'online') AS offline,
         (SELECT count(*)::int FROM machines WHERE status = 'online' AND price_per_gpu_hour_micro_usd IS NULL) AS unpriced,
         (SELECT count(*)::int FROM machines WHERE NOT simulated) AS real,
         (SELECT count(DISTINCT region_key)::int FROM machines) AS regions,
         (SELECT count(*)::int FROM machine_uptime_days) AS days`,
    );
    t.same(counts, { farms: result.farms, machines: 400, gpus: result.gpus, busy: result.busyGpus, offline: result.offline, unpriced: result.unpriced, real: 0, regions: REGIONS.length, days: result.uptimeDays });
    t.ok(result.offline >= 5 && result.offline <= 40, `about 5 % offline (${result.offline})`);
    t.ok(result.unpriced >= 2 && result.unpriced <= 30, `about 3 % unpriced (${result.unpriced})`);
    t.ok(result.busyGpus > 0 && result.busyGpus < result.gpus / 2, 'some GPUs busy');
    t.ok(result.uptimeDays >= 400 * 28, 'about 30 uptime days per machine');

    const index = createOfferIndex(db, { refreshMs: 60_000, allowSimulated: true });
    t.teardown(() => index.close());
    await index.start();
    const offers = index.listOffers().data;
    t.ok(offers.length > 10);
    for (const offer of offers) capacityOfferSchema.parse(offer);
    t.ok(offers.every((o) => o.simulated), 'simulated');
    t.ok(offers.every((o) => o.uptimePct >= 80 && o.uptimePct <= 100), 'uptimes between 85 and 100 %, give or take the daily jitter');
    const h100 = index.supply().classes.find((c) => c.gpuClass.classId === 'h100-80gb-sxm')!;
    if (h100.gpusPriced > 0) t.ok(h100.prices[0]! >= 1_900_000 && h100.prices[h100.prices.length - 1]! <= 3_400_000, 'H100 around $2.00-3.20');
    const r4090 = index.supply().classes.find((c) => c.gpuClass.classId === 'rtx-4090-24gb')!;
    if (r4090.gpusPriced > 0) t.ok(r4090.prices[0]! >= 280_000 && r4090.prices[r4090.prices.length - 1]! <= 650_000, '4090 around $0.30-0.60');
    const tiers = new Set(offers.map((o) => o.benchmarkTier));
    t.ok(tiers.size >= 3, 'several tiers');
    t.ok(new Set(offers.map((o) => o.gpu.family)).size === 3, 'consumer, workstation and datacenter classes');

    const again = await seedFleet(db, { machines: 10, seed: 11, now });
    t.equal(again.machines, 10, 'seeding again adds machines');
    const slugs = await db.query<{ slug: string }>(`SELECT slug FROM farms WHERE slug LIKE '%-2'`);
    t.ok(slugs.length >= 3, 'taken slugs get a suffix');
  });
}

t.test('behavior: the same seed gives the same fleet', async (t) => {
  const now = new Date('2026-10-01T12:00:00Z');
  const a = (await createPostgresTestDatabase(t)).db;
  const b = (await createPostgresTestDatabase(t)).db;
  const c = (await createPostgresTestDatabase(t)).db;
  await seedFleet(a, { machines: 120, seed: 5, now });
  await seedFleet(b, { machines: 120, seed: 5, now });
  await seedFleet(c, { machines: 120, seed: 6, now });
  const fleetA = await content(a);
  t.same(await content(b), fleetA);
  t.notSame(await content(c), fleetA, 'another seed, another fleet');
});
