import { pricingSchema } from '@gpufarm/shared';
import t from 'tap';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { buildTestApp } from './helpers/app.js';
import { createPostgresTestDatabase } from './helpers/database.js';

t.test('GET /v1/pricing', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const { app, offerIndex } = await buildTestApp(t, { db, env: { GF_PLATFORM_FEE_BPS: '1500' } });

  t.test('default: no fleet, every class with null prices', async (t) => {
    const res = await app.inject({ url: '/v1/pricing', remoteAddress: '10.8.0.1' });
    t.equal(res.statusCode, 200);
    t.equal(res.headers['access-control-allow-origin'], '*');
    const body = pricingSchema.parse(res.json());
    t.match(body, { object: 'pricing', chainId: 4663, currency: 'USD', platformFeeBps: 1500, minBillingSeconds: { min: 60, max: 60 } });
    t.match(body.unit, /micro-USD/);
    t.ok(body.classes.every((c) => c.gpusOnline === 0 && c.minPerGpuHourMicroUsd === null));
  });

  t.test('behavior: exact counts and prices weighted per GPU', async (t) => {
    const farm = await createFarm(db, { slug: 'pricing-farm' });
    const suspended = await createFarm(db, { slug: 'pricing-suspended', status: 'suspended' });
    // H100 GPUs at 2.0 (x6, 3 busy), 2.400001 (x4), 3.0 (x2, both busy) and an unpriced x8 (1 busy):
    // 12 priced GPUs; the 6th and 7th are 2.0 and 2.400001, median 2.2000005 rounded down.
    await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'h100-80gb-sxm', gpuCount: 6, busyGpus: 3, pricePerGpuHourMicroUsd: 2_000_000, minBillingSeconds: 300 });
    await createMachine(db, { farmId: farm.id, regionKey: 'europe-west', classId: 'h100-80gb-sxm', gpuCount: 4, pricePerGpuHourMicroUsd: 2_400_001, minBillingSeconds: 90 });
    await createMachine(db, { farmId: farm.id, regionKey: 'us-west', classId: 'h100-80gb-sxm', gpuCount: 2, busyGpus: 2, pricePerGpuHourMicroUsd: 3_000_000 });
    await createMachine(db, { farmId: farm.id, regionKey: 'us-west', classId: 'h100-80gb-sxm', gpuCount: 8, busyGpus: 1, pricePerGpuHourMicroUsd: null, minBillingSeconds: 600 });
    await createMachine(db, { farmId: farm.id, regionKey: 'us-west', classId: 'h100-80gb-sxm', gpuCount: 8, pricePerGpuHourMicroUsd: 1_000_000, status: 'offline' });
    await createMachine(db, { farmId: suspended.id, regionKey: 'us-west', classId: 'h100-80gb-sxm', gpuCount: 8, pricePerGpuHourMicroUsd: 1_000_000 });
    await createMachine(db, { farmId: farm.id, regionKey: 'us-west', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 350_001, minBillingSeconds: 120 });
    await offerIndex.refresh();
    const body = pricingSchema.parse((await app.inject({ url: '/v1/pricing', remoteAddress: '10.8.0.2' })).json());
    t.same(body.classes.find((c) => c.classId === 'h100-80gb-sxm'), {
      classId: 'h100-80gb-sxm',
      label: 'H100 80GB SXM',
      family: 'datacenter',
      vramBytes: 80 * 1024 ** 3,
      gpusOnline: 20,
      gpusBusy: 6,
      gpusAvailable: 7,
      gpusPriced: 12,
      minPerGpuHourMicroUsd: 2_000_000,
      medianPerGpuHourMicroUsd: 2_200_000,
      maxPerGpuHourMicroUsd: 3_000_000,
    });
    t.match(body.classes.find((c) => c.classId === 'rtx-4090-24gb'), { gpusPriced: 1, minPerGpuHourMicroUsd: 350_001, medianPerGpuHourMicroUsd: 350_001, maxPerGpuHourMicroUsd: 350_001 });
    t.same(body.minBillingSeconds, { min: 60, max: 300 }, 'over offered machines only');
  });
});
