import { MIN_BILLING_SECONDS, type PaymentAsset, type Pricing } from '@gpufarm/shared';
import type { FleetSupply } from '../capacity/snapshot.js';
import type { Config } from '../config.js';

/** The ETH payment asset: the zero address stands for the chain's native coin. */
export const ETH_ASSET: PaymentAsset = { kind: 'eth', token: '0x0000000000000000000000000000000000000000', symbol: 'ETH', decimals: 18 };
export const PRICING_UNIT = 'per GPU-hour, in micro-USD (1 USD = 1,000,000)';

export interface PriceSpread {
  min: number;
  median: number;
  max: number;
}

/**
 * Min, median and max of prices weighted per GPU: a machine with 8 GPUs at a price counts as
 * eight values. `prices` ascending, `gpus[i]` GPUs at `prices[i]`. The median of an even count
 * is the mean of the two middle values, rounded down. Null when there is no GPU.
 *
 * @example priceSpread([1, 3], [1, 1]) // { min: 1, median: 2, max: 3 }
 */
export function priceSpread(prices: ArrayLike<number>, gpus: ArrayLike<number>): PriceSpread | null {
  let total = 0;
  for (let i = 0; i < gpus.length; i++) total += gpus[i]!;
  if (total === 0) return null;
  /** The value at 0-based position `k` of the expanded list. */
  const at = (k: number): number => {
    let seen = 0;
    for (let i = 0; i < prices.length; i++) {
      seen += gpus[i]!;
      if (k < seen) return prices[i]!;
    }
    return prices[prices.length - 1]!;
  };
  let first = 0;
  while (gpus[first] === 0) first++;
  let last = prices.length - 1;
  while (gpus[last] === 0) last--;
  const median = total % 2 === 1 ? at((total - 1) / 2) : Math.floor((at(total / 2 - 1) + at(total / 2)) / 2);
  return { min: prices[first]!, median, max: prices[last]! };
}

/** The payment assets the escrow takes on this deployment. */
export function paymentAssets(config: Pick<Config, 'stableToken'>): PaymentAsset[] {
  const assets = [ETH_ASSET];
  if (config.stableToken) assets.push({ kind: 'stable', token: config.stableToken.address, symbol: config.stableToken.symbol, decimals: config.stableToken.decimals });
  return assets;
}

/** The pricing object of `GET /v1/pricing` from the fleet's supply. Pure. */
export function buildPricing(supply: FleetSupply, config: Pick<Config, 'chainId' | 'platformFeeBps' | 'stableToken'>): Pricing {
  return {
    object: 'pricing',
    chainId: config.chainId,
    currency: 'USD',
    unit: PRICING_UNIT,
    platformFeeBps: config.platformFeeBps,
    minBillingSeconds: supply.minBillingSeconds ?? { min: MIN_BILLING_SECONDS, max: MIN_BILLING_SECONDS },
    paymentAssets: paymentAssets(config),
    classes: supply.classes.map((c) => {
      const spread = priceSpread(c.prices, c.priceGpus);
      return {
        classId: c.gpuClass.classId,
        label: c.gpuClass.label,
        family: c.gpuClass.family,
        vramBytes: c.gpuClass.vramBytes,
        gpusOnline: c.gpusOnline,
        gpusBusy: c.gpusBusy,
        gpusAvailable: c.gpusAvailable,
        gpusPriced: c.gpusPriced,
        minPerGpuHourMicroUsd: spread?.min ?? null,
        medianPerGpuHourMicroUsd: spread?.median ?? null,
        maxPerGpuHourMicroUsd: spread?.max ?? null,
      };
    }),
  };
}
