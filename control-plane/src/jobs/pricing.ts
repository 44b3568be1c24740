import { finalCost, formatMicroUsd, GPU_CLASSES, MIN_BILLING_SECONDS, type ErrorDetail, type JobEstimate } from '@gpufarm/shared';
import type { FittingMachine } from '../capacity/fit.js';

/** A job priced against the capacity that exists now. */
export interface JobPriceTerms {
  maxPricePerGpuHourMicroUsd: number;
  /** True when the cap was not asked for: the highest price among fitting machines. */
  capDefaulted: boolean;
  minBillingSeconds: number;
  platformFeeBps: number;
  estimate: JobEstimate;
  maxCostMicroUsd: number;
}

export interface PriceJobInput {
  gpuCount: number;
  maxRuntimeSeconds: number;
  /** The runtime estimate; defaults to the minimum billing up to `maxRuntimeSeconds`. */
  estRuntime: { minSeconds: number; maxSeconds: number } | null;
  /** The customer's cap, micro-USD per GPU-hour; null takes the default. */
  requestedCapMicroUsd: number | null;
  /** The field the cap came from, for error details. */
  capField: 'maxPricePerGpuHour' | 'maxPricePerGpuHourMicroUsd';
  fitting: readonly FittingMachine[];
  platformFeeBps: number;
}

/**
 * Prices a job (pure): the cap (asked for, or the highest price among machines that fit the
 * whole job), the machines and classes matched at or under it, the estimate range and the most
 * it can cost. The range uses `estRuntime` and the matched machines' lowest and highest prices;
 * the minimum billing is the highest among matched machines, and each end is billed at least that. `maxCost` is the cap for the whole
 * `maxRuntimeSeconds` (or the minimum billing, when longer), fee included.
 */
export function priceJob(input: PriceJobInput): { ok: true; terms: JobPriceTerms } | { ok: false; details: ErrorDetail[] } {
  if (input.fitting.length === 0) {
    return {
      ok: false,
      details: [{ field: 'gpu', message: `gpu: no machine offered now has ${input.gpuCount} GPU(s) of this kind on one machine; see GET /v1/capacity and relax gpu.count, the memory or the model allowlist` }],
    };
  }
  const capDefaulted = input.requestedCapMicroUsd === null;
  const prices = (machines: readonly FittingMachine[]) => machines.map((m) => m.priceMicroUsd);
  const cap = input.requestedCapMicroUsd ?? Math.max(...prices(input.fitting));
  const matched = input.fitting.filter((m) => m.priceMicroUsd <= cap);
  if (matched.length === 0) {
    const cheapest = Math.min(...prices(input.fitting));
    return {
      ok: false,
      details: [{
        field: input.capField,
        message: `${input.capField}: no machine that fits the job is offered at or below ${formatMicroUsd(cap)} USD per GPU-hour; the cheapest costs ${formatMicroUsd(cheapest)}`,
      }],
    };
  }
  const minBillingSeconds = Math.max(MIN_BILLING_SECONDS, ...matched.map((m) => m.minBillingSeconds));
  const lowPrice = Math.min(...prices(matched));
  const highPrice = Math.max(...prices(matched));
  const matchedClasses = GPU_CLASSES.map((c) => c.classId).filter((id) => matched.some((m) => m.classId === id));
  const est = input.estRuntime ?? { minSeconds: 0, maxSeconds: input.maxRuntimeSeconds };
  const cost = (pricePerGpuHourMicroUsd: number, runtimeSeconds: number) =>
    finalCost({ runtimeSeconds, minBillingSeconds, gpuCount: input.gpuCount, pricePerGpuHourMicroUsd, platformFeeBps: input.platformFeeBps }).totalMicroUsd;
  const estimate: JobEstimate = {
    lowMicroUsd: cost(lowPrice, est.minSeconds),
    highMicroUsd: cost(highPrice, est.maxSeconds),
    assumptions: [
      `runtime from ${Math.max(est.minSeconds, minBillingSeconds)} to ${Math.max(est.maxSeconds, minBillingSeconds)} seconds${input.estRuntime ? '' : ' (no estRuntime given: from the minimum billing to maxRuntimeSeconds)'}`,
      `${input.gpuCount} GPU(s) at ${formatMicroUsd(lowPrice)} to ${formatMicroUsd(highPrice)} USD per GPU-hour, the matched offers' prices at or below the cap`,
      `billed at least ${minBillingSeconds} seconds`,
      `platform fee ${input.platformFeeBps} basis points included`,
    ],
    matchedClasses,
  };
  return {
    ok: true,
    terms: {
      maxPricePerGpuHourMicroUsd: cap,
      capDefaulted,
      minBillingSeconds,
      platformFeeBps: input.platformFeeBps,
      estimate,
      maxCostMicroUsd: cost(cap, input.maxRuntimeSeconds),
    },
  };
}
