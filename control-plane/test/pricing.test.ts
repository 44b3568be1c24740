import { GPU_CLASSES, pricingSchema } from '@gpufarm/shared';
import t from 'tap';
import type { FleetSupply } from '../src/capacity/snapshot.js';
import { loadConfig } from '../src/config.js';
import { buildPricing, priceSpread } from '../src/pricing/summary.js';

t.test('priceSpread: min, median and max weighted per GPU', async (t) => {
  t.equal(priceSpread([], []), null, 'no GPU: null');
  t.same(priceSpread([500], [1]), { min: 500, median: 500, max: 500 });
  t.same(priceSpread([1, 3], [1, 1]), { min: 1, median: 2, max: 3 }, 'even count: mean of the middle two');
  t.same(priceSpread([1, 2], [1, 1]), { min: 1, median: 1, max: 2 }, 'the mean is rounded down');
  t.same(priceSpread([100, 900], [1, 8]), { min: 100, median: 900, max: 900 }, 'an 8-GPU machine weighs eight times');
  t.same(priceSpread([100, 200, 900], [3, 1, 2]), { min: 100, median: 150, max: 900 }, '100,100,100,200,900,900: (100 + 200) / 2');
  t.same(priceSpread([100, 200, 300], [2, 1, 2]), { min: 100, median: 200, max: 300 }, 'odd count: the middle value');
});

t.test('buildPricing: every catalog class, fee, billing range and payment assets', async (t) => {
  const supply: FleetSupply = {
    classes: GPU_CLASSES.map((gpuClass) =>
      gpuClass.classId === 'l4-24gb'
        ? { gpuClass, gpusOnline: 7, gpusBusy: 2, gpusAvailable: 3, gpusPriced: 5, prices: Float64Array.from([300_000, 400_001]), priceGpus: Int32Array.from([4, 1]) }
        : { gpuClass, gpusOnline: 0, gpusBusy: 0, gpusAvailable: 0, gpusPriced: 0, prices: new Float64Array(), priceGpus: new Int32Array() },
    ),
    minBillingSeconds: { min: 60, max: 300 },
  };
  const plain = pricingSchema.parse(buildPricing(supply, loadConfig({ GF_PLATFORM_FEE_BPS: '250' })));
  t.equal(plain.platformFeeBps, 250);
  t.same(plain.minBillingSeconds, { min: 60, max: 300 });
  t.same(plain.paymentAssets, [{ kind: 'eth', token: '0x0000000000000000000000000000000000000000', symbol: 'ETH', decimals: 18 }]);
  t.same(plain.classes.map((c) => c.classId), GPU_CLASSES.map((c) => c.classId));
  t.same(plain.classes.find((c) => c.classId === 'l4-24gb'), {
    classId: 'l4-24gb',
    label: 'L4 24GB',
    family: 'datacenter',
    vramBytes: 24 * 1024 ** 3,
    gpusOnline: 7,
    gpusBusy: 2,
    gpusAvailable: 3,
    gpusPriced: 5,
    minPerGpuHourMicroUsd: 300_000,
    medianPerGpuHourMicroUsd: 300_000,
    maxPerGpuHourMicroUsd: 400_001,
  });
  t.match(plain.classes.find((c) => c.classId === 'h100-80gb-sxm'), { minPerGpuHourMicroUsd: null, medianPerGpuHourMicroUsd: null, maxPerGpuHourMicroUsd: null });

  const stable = buildPricing(
    { ...supply, minBillingSeconds: null },
    loadConfig({ GF_STABLE_TOKEN_ADDRESS: '0xAbCdEf0123456789aBcDeF0123456789ABCDEF01', GF_STABLE_TOKEN_SYMBOL: 'USDC', GF_STABLE_TOKEN_DECIMALS: '6' }),
  );
  t.same(stable.minBillingSeconds, { min: 60, max: 60 }, 'nothing offered: 60/60');
  t.same(stable.paymentAssets[1], { kind: 'stable', token: '0xabcdef0123456789abcdef0123456789abcdef01', symbol: 'USDC', decimals: 6 });
});
