import type { FleetSupply } from '../capacity/snapshot.js';

/** The market for one GPU class: supply and the going price per GPU-hour over the offered machines. */
export interface ClassMarket {
  classId: string;
  gpusOnline: number;
  gpusBusy: number;
  minPerGpuHourMicroUsd: number | null;
  /** The price half the offered GPUs are at or below. */
  medianPerGpuHourMicroUsd: number | null;
  maxPerGpuHourMicroUsd: number | null;
}

/**
 * Going prices per class from the offer index's supply. The median is weighted by GPUs, as a
 * customer meets them: a machine of eight GPUs counts eight times.
 */
export function goingPrices(supply: FleetSupply): ClassMarket[] {
  return supply.classes.map((c) => {
    const n = c.prices.length;
    let median: number | null = null;
    if (n > 0) {
      let total = 0;
      for (let i = 0; i < n; i++) total += c.priceGpus[i]!;
      let seen = 0;
      for (let i = 0; i < n; i++) {
        seen += c.priceGpus[i]!;
        if (seen * 2 >= total) {
          median = c.prices[i]!;
          break;
        }
      }
    }
    return {
      classId: c.gpuClass.classId,
      gpusOnline: c.gpusOnline,
      gpusBusy: c.gpusBusy,
      minPerGpuHourMicroUsd: n > 0 ? c.prices[0]! : null,
      medianPerGpuHourMicroUsd: median,
      maxPerGpuHourMicroUsd: n > 0 ? c.prices[n - 1]! : null,
    };
  });
}
