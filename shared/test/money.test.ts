import t from 'tap';
import {
  assertMicroUsd,
  ceilDiv,
  decimalStringToTokenUnits,
  ethMaxPayment,
  finalCost,
  formatMicroUsd,
  formatTokenAmount,
  MAX_UINT256,
  maxCostMicroUsd,
  parseTokenAmount,
  parseUsdToMicroUsd,
  stableMaxPayment,
  tokenAmountSchema,
  tokenUnitsToDecimalString,
} from '../src/money.js';

function micro(input: number | string): number {
  const r = parseUsdToMicroUsd(input);
  if (!r.ok) throw new Error(`expected ${String(input)} to parse: ${r.message}`);
  return r.microUsd;
}

t.test('parseUsdToMicroUsd', async (t) => {
  t.test('default: plain decimal strings convert exactly', async (t) => {
    t.equal(micro('2.5'), 2_500_000);
    t.equal(micro('2'), 2_000_000);
    t.equal(micro('0'), 0);
    t.equal(micro('0.000001'), 1);
    t.equal(micro('1234.567891'), 1_234_567_891);
    t.equal(micro('00012.5'), 12_500_000, 'leading zeros are harmless');
    t.equal(micro('2.5000000'), 2_500_000, 'trailing zeros beyond 6 places are not precision');
  });

  t.test('behavior: "0.1" + "0.2" is exactly "0.3"; the float sum is refused', async (t) => {
    t.equal(micro('0.1') + micro('0.2'), micro('0.3'));
    t.equal(micro('0.3'), 300_000);
    const floatSum = parseUsdToMicroUsd(0.1 + 0.2);
    t.equal(floatSum.ok, false, '0.30000000000000004 has 17 decimals');
    if (!floatSum.ok) t.match(floatSum.message, /at most 6 decimal places/);
  });

  t.test('args: numbers go through their shortest round-trip string', async (t) => {
    t.equal(micro(2.675), 2_675_000, '2.675 is not 2674999.99…');
    t.equal(micro(1.005), 1_005_000);
    t.equal(micro(0.1), 100_000);
    t.equal(micro(1e-6), 1, 'exponent form with 6 decimals');
    t.equal(micro(123456789.123456), 123_456_789_123_456);
    t.equal(micro(5), 5_000_000);
    t.equal(micro(-0), 0);
    t.equal(micro(1e9), 1_000_000_000_000_000);
  });

  t.test('behavior: huge values at the safe-integer edge', async (t) => {
    t.equal(micro('9007199254.740991'), Number.MAX_SAFE_INTEGER);
    t.same(parseUsdToMicroUsd('9007199254.740992'), { ok: false, message: 'is too large' });
    t.same(parseUsdToMicroUsd('99999999999999999999'), { ok: false, message: 'is too large' });
    t.same(parseUsdToMicroUsd(1e21), { ok: false, message: 'is too large' });
    t.same(parseUsdToMicroUsd(Number.MAX_VALUE), { ok: false, message: 'is too large' });
  });

  const refused: [unknown, RegExp][] = [
    [1e-7, /6 decimal places/],
    [1.5e-7, /6 decimal places/],
    [5e-324, /6 decimal places/],
    ['0.0000001', /6 decimal places/],
    ['2.1234567', /6 decimal places/],
    ['1e-6', /plain decimal/],
    ['1E3', /plain decimal/],
    [' 1', /plain decimal/],
    ['1 ', /plain decimal/],
    ['+1', /plain decimal/],
    ['1.', /plain decimal/],
    ['.5', /plain decimal/],
    ['', /plain decimal/],
    ['1,000', /plain decimal/],
    ['0x10', /plain decimal/],
    ['Infinity', /plain decimal/],
    ['-1', /negative/],
    ['-0.5', /negative/],
    [-1, /negative/],
    [-1e-7, /negative/],
    [NaN, /finite/],
    [Infinity, /finite/],
    [-Infinity, /finite/],
    ['1'.repeat(65), /too long/],
    [true, /number or a decimal string/],
    [null, /number or a decimal string/],
  ];
  for (const [input, message] of refused) {
    t.test(`error: ${typeof input === 'string' ? JSON.stringify(input) : String(input)} is refused`, async (t) => {
      const r = parseUsdToMicroUsd(input as number | string);
      t.equal(r.ok, false);
      if (!r.ok) t.match(r.message, message);
    });
  }
});

t.test('formatMicroUsd', async (t) => {
  t.equal(formatMicroUsd(2_500_000), '2.5');
  t.equal(formatMicroUsd(3_000_000), '3');
  t.equal(formatMicroUsd(1), '0.000001');
  t.equal(formatMicroUsd(0), '0');
  t.equal(formatMicroUsd(2_675_000), '2.675');
  t.equal(formatMicroUsd(Number.MAX_SAFE_INTEGER), '9007199254.740991');
  t.equal(formatMicroUsd(12_345_678_901_234_567_890n), '12345678901234.56789', 'bigint beyond 2^53');
  t.throws(() => formatMicroUsd(1.5), RangeError);
  t.throws(() => formatMicroUsd(2 ** 53), RangeError);
  for (const value of [0, 1, 10, 999_999, 1_000_000, 1_000_001, 2_675_000, 123_456_789_123_456, Number.MAX_SAFE_INTEGER]) {
    t.equal(micro(formatMicroUsd(value)), value, `round trip ${value}`);
  }
});

t.test('assertMicroUsd', async (t) => {
  t.doesNotThrow(() => assertMicroUsd(0));
  t.doesNotThrow(() => assertMicroUsd(Number.MAX_SAFE_INTEGER));
  for (const bad of [-1, 1.5, 2 ** 53, NaN, Infinity, '1', 1n, null]) {
    t.throws(() => assertMicroUsd(bad, 'price'), { name: 'RangeError', message: /^price must be/ }, `refuses ${String(bad)}`);
  }
});

t.test('token amounts', async (t) => {
  t.test('default: parse and format canonical base units', async (t) => {
    t.equal(parseTokenAmount('0'), 0n);
    t.equal(parseTokenAmount('1000000000000000000000000'), 10n ** 24n, 'beyond 2^53');
    t.equal(parseTokenAmount(MAX_UINT256.toString()), MAX_UINT256);
    t.equal(formatTokenAmount(2n ** 200n), (2n ** 200n).toString());
    t.equal(parseTokenAmount(formatTokenAmount(2n ** 200n + 7n)), 2n ** 200n + 7n);
  });

  for (const bad of ['', '-1', '+1', ' 1', '1 ', '01', '00', '1.0', '1e3', '0x10', 'abc', (MAX_UINT256 + 1n).toString()]) {
    t.test(`error: parseTokenAmount(${JSON.stringify(bad)}) throws`, async (t) => {
      t.throws(() => parseTokenAmount(bad), /token amount/);
    });
  }
  t.throws(() => formatTokenAmount(-1n), RangeError);
  t.throws(() => formatTokenAmount(MAX_UINT256 + 1n), RangeError);

  t.test('args: units and decimals', async (t) => {
    t.equal(tokenUnitsToDecimalString(1_500_000n, 6), '1.5');
    t.equal(tokenUnitsToDecimalString(10n ** 18n, 18), '1');
    t.equal(tokenUnitsToDecimalString(1n, 18), '0.000000000000000001');
    t.equal(tokenUnitsToDecimalString(0n, 6), '0');
    t.equal(tokenUnitsToDecimalString(123n, 0), '123');
    t.equal(tokenUnitsToDecimalString(12_345_678_901_234_567_890_123n, 18), '12345.678901234567890123');
    t.equal(decimalStringToTokenUnits('1.5', 6), 1_500_000n);
    t.equal(decimalStringToTokenUnits('0.000000000000000001', 18), 1n);
    t.equal(decimalStringToTokenUnits('12345.678901234567890123', 18), 12_345_678_901_234_567_890_123n);
    t.equal(decimalStringToTokenUnits('1.50', 1), 15n, 'trailing zeros beyond decimals are fine');
    t.equal(decimalStringToTokenUnits('7', 0), 7n);
    t.throws(() => decimalStringToTokenUnits('1.05', 1), /more than 1 decimal places/);
    t.throws(() => decimalStringToTokenUnits('1e3', 0), /plain decimal/);
    t.throws(() => decimalStringToTokenUnits('-1', 6), /plain decimal/);
    t.throws(() => decimalStringToTokenUnits('1', -1), RangeError);
    t.throws(() => tokenUnitsToDecimalString(-1n, 6), RangeError);
    for (const units of [0n, 1n, 999_999n, 10n ** 30n + 12345n]) {
      t.equal(decimalStringToTokenUnits(tokenUnitsToDecimalString(units, 18), 18), units, `round trip ${units}`);
    }
  });

  t.test('args: tokenAmountSchema', async (t) => {
    t.ok(tokenAmountSchema.safeParse('0').success);
    t.ok(tokenAmountSchema.safeParse((2n ** 255n).toString()).success);
    t.ok(tokenAmountSchema.safeParse(MAX_UINT256.toString()).success);
    for (const bad of ['01', '-1', '1.5', '', ' 1', (MAX_UINT256 + 1n).toString(), 1, 1n, null]) {
      t.notOk(tokenAmountSchema.safeParse(bad).success, `refuses ${String(bad)}`);
    }
  });
});

t.test('ceilDiv', async (t) => {
  t.equal(ceilDiv(7n, 2n), 4n);
  t.equal(ceilDiv(6n, 2n), 3n);
  t.equal(ceilDiv(1n, 3600n), 1n);
  t.equal(ceilDiv(0n, 5n), 0n);
  t.equal(ceilDiv(-7n, 2n), -3n, 'ceiling of -3.5');
  t.equal(ceilDiv(10n ** 40n + 1n, 10n ** 20n), 10n ** 20n + 1n);
  t.throws(() => ceilDiv(1n, 0n), RangeError);
  t.throws(() => ceilDiv(1n, -1n), RangeError);
});

t.test('maxCostMicroUsd', async (t) => {
  t.same(
    maxCostMicroUsd({ maxPricePerGpuHourMicroUsd: 2_000_000, gpuCount: 2, maxRuntimeSeconds: 5400, platformFeeBps: 1000 }),
    { computeMicroUsd: 6_000_000, feeMicroUsd: 600_000, totalMicroUsd: 6_600_000 },
  );
  t.same(
    maxCostMicroUsd({ maxPricePerGpuHourMicroUsd: 1, gpuCount: 1, maxRuntimeSeconds: 60, platformFeeBps: 250 }),
    { computeMicroUsd: 1, feeMicroUsd: 1, totalMicroUsd: 2 },
    'both steps round up',
  );
  t.same(
    maxCostMicroUsd({ maxPricePerGpuHourMicroUsd: 1_234_567, gpuCount: 3, maxRuntimeSeconds: 3601, platformFeeBps: 1500 }),
    { computeMicroUsd: 3_704_730, feeMicroUsd: 555_710, totalMicroUsd: 4_260_440 },
  );
  t.same(
    maxCostMicroUsd({ maxPricePerGpuHourMicroUsd: 999_999_999_999, gpuCount: 15, maxRuntimeSeconds: 604_799, platformFeeBps: 1000 }),
    { computeMicroUsd: 2_519_995_833_330_814, feeMicroUsd: 251_999_583_333_082, totalMicroUsd: 2_771_995_416_663_896 },
    'intermediate product beyond 2^53 stays exact',
  );
  t.same(
    maxCostMicroUsd({ maxPricePerGpuHourMicroUsd: 3_000_000, gpuCount: 1, maxRuntimeSeconds: 3600, platformFeeBps: 0 }),
    { computeMicroUsd: 3_000_000, feeMicroUsd: 0, totalMicroUsd: 3_000_000 },
  );
  t.throws(() => maxCostMicroUsd({ maxPricePerGpuHourMicroUsd: Number.MAX_SAFE_INTEGER, gpuCount: 16, maxRuntimeSeconds: 604_800, platformFeeBps: 0 }), /exceeds/);
  t.throws(() => maxCostMicroUsd({ maxPricePerGpuHourMicroUsd: 1.5, gpuCount: 1, maxRuntimeSeconds: 60, platformFeeBps: 0 }), /maxPricePerGpuHourMicroUsd/);
  t.throws(() => maxCostMicroUsd({ maxPricePerGpuHourMicroUsd: 1, gpuCount: 1, maxRuntimeSeconds: 60, platformFeeBps: 10_001 }), /platformFeeBps/);
});

t.test('finalCost', async (t) => {
  t.same(
    finalCost({ runtimeSeconds: 30, minBillingSeconds: 60, gpuCount: 2, pricePerGpuHourMicroUsd: 3_600_000, platformFeeBps: 1000 }),
    { billableGpuSeconds: 120, computeMicroUsd: 120_000, feeMicroUsd: 12_000, totalMicroUsd: 132_000 },
    'minimum billing applies',
  );
  t.same(
    finalCost({ runtimeSeconds: 61, minBillingSeconds: 60, gpuCount: 1, pricePerGpuHourMicroUsd: 1_000_001, platformFeeBps: 333 }),
    { billableGpuSeconds: 61, computeMicroUsd: 16_945, feeMicroUsd: 565, totalMicroUsd: 17_510 },
    'runtime above the minimum, both steps round up',
  );
  const max = maxCostMicroUsd({ maxPricePerGpuHourMicroUsd: 1_234_567, gpuCount: 3, maxRuntimeSeconds: 3601, platformFeeBps: 1500 });
  const full = finalCost({ runtimeSeconds: 3601, minBillingSeconds: 60, gpuCount: 3, pricePerGpuHourMicroUsd: 1_234_567, platformFeeBps: 1500 });
  t.equal(full.totalMicroUsd, max.totalMicroUsd, 'a job that runs to its limit at its cap costs exactly the max');
  t.throws(() => finalCost({ runtimeSeconds: -1, minBillingSeconds: 60, gpuCount: 1, pricePerGpuHourMicroUsd: 1, platformFeeBps: 0 }), /runtimeSeconds/);
});

t.test('payments', async (t) => {
  t.equal(stableMaxPayment(6_600_000), 6_600_000n);
  t.equal(stableMaxPayment(0), 0n);
  t.equal(ethMaxPayment(6_600_000, 400_000_000_000_000n), 2_640_000_000_000_000n, 'USD 6.60 at 2500 USD/ETH');
  t.equal(ethMaxPayment(1, 333_333_333_333_333n), 333_333_334n, 'rounded up');
  t.equal(ethMaxPayment(Number.MAX_SAFE_INTEGER, 10n ** 18n), 9_007_199_254_740_991_000_000_000_000n);
  t.throws(() => ethMaxPayment(1, 0n), RangeError);
  t.throws(() => stableMaxPayment(-1), RangeError);
});
