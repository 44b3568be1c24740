import { fieldDetail, finalCost, formatMicroUsd, MIN_BILLING_SECONDS, type ErrorDetail, type JobEstimate } from '@gpufarm/shared';
import type { FitSummary } from '../capacity/fit.js';

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
  /** The runtime estimate; null: from the minimum billing to `maxRuntimeSeconds`. */
  estRuntime: { minSeconds: number; maxSeconds: number } | null;
  /** The customer's cap, micro-USD per GPU-hour; null takes the default. */
  requestedCapMicroUsd: number | null;
  /** The fitting machines, summarized with the requested cap (`summarizeFit`). */
  fit: FitSummary;
  platformFeeBps: number;
  /** Online machines holding the job's image now (`image-holders.ts`); null or absent: not known. */
  imageHolders?: number | null;
}

/**
 * Prices a job (pure). The cap is the one asked for, or the highest price among machines that
 * fit the whole job. The estimate runs from the lowest matched price (machines at or under the
 * cap) for `estRuntime.minSeconds` to the highest for `estRuntime.maxSeconds`, each billed at
 * least the minimum billing (the highest among matched machines), fee included; `maxCost` is the
 * cap for `maxRuntimeSeconds` (or the minimum billing, when longer). With a cap and nothing
 * matching now, the job is priced at its cap and waits for capacity; with neither, it is refused.
 * When machines hold the job's image, the assumptions say how many (the matcher prefers one of
 * them among equal offers, and the job then starts without pulling it).
 */
export function priceJob(input: PriceJobInput): { ok: true; terms: JobPriceTerms } | { ok: false; details: ErrorDetail[] } {
  const { fit } = input;
  if (input.requestedCapMicroUsd === null && fit.fitting === 0) {
    return {
      ok: false,
      details: [
        fieldDetail(
          'gpu',
          `no machine offered now has ${input.gpuCount} GPU(s) of this kind on one machine, so there is no price to default the cap to; see GET /v1/capacity, relax gpu.count, the memory, the model allowlist or gpu.proven, or give maxPricePerGpuHour to wait for capacity`,
        ),
      ],
    };
  }
  const capDefaulted = input.requestedCapMicroUsd === null;
  const cap = input.requestedCapMicroUsd ?? fit.maxFittingPriceMicroUsd;
  const waits = fit.matched === 0;
  const minBillingSeconds = Math.max(MIN_BILLING_SECONDS, fit.maxMinBillingSeconds);
  const lowPrice = waits ? cap : fit.minPriceMicroUsd;
  const highPrice = waits ? cap : fit.maxPriceMicroUsd;
  const est = input.estRuntime ?? { minSeconds: 0, maxSeconds: input.maxRuntimeSeconds };
  const cost = (pricePerGpuHourMicroUsd: number, runtimeSeconds: number) =>
    finalCost({ runtimeSeconds, minBillingSeconds, gpuCount: input.gpuCount, pricePerGpuHourMicroUsd, platformFeeBps: input.platformFeeBps }).totalMicroUsd;
  const assumptions = [
    `runtime from ${Math.max(est.minSeconds, minBillingSeconds)} to ${Math.max(est.maxSeconds, minBillingSeconds)} seconds${input.estRuntime ? '' : ' (no estRuntime given: from the minimum billing to maxRuntimeSeconds)'}`,
    waits
      ? fit.fitting === 0
        ? `no machine offered now fits the whole job${fit.noFitReasons.length > 0 ? ` (${fit.noFitReasons.join('; ')})` : ''}; it waits for capacity at up to ${formatMicroUsd(cap)} USD per GPU-hour`
        : `no machine that fits the whole job is offered at or below ${formatMicroUsd(cap)} USD per GPU-hour now (the cheapest costs ${formatMicroUsd(fit.minFittingPriceMicroUsd)}); it waits for capacity, estimated at the cap`
      : `${input.gpuCount} GPU(s) at ${formatMicroUsd(lowPrice)} to ${formatMicroUsd(highPrice)} USD per GPU-hour, the prices of the matched machines at or below the cap`,
    `billed at least ${minBillingSeconds} seconds`,
    `platform fee ${input.platformFeeBps} basis points included`,
  ];
  const holders = input.imageHolders ?? 0;
  if (holders > 0) {
    assumptions.push(
      `the image is cached on ${holders} machine${holders === 1 ? '' : 's'} of the market now; among equally good offers the matcher prefers one that holds it, so the job may start without pulling it`,
    );
  }
  return {
    ok: true,
    terms: {
      maxPricePerGpuHourMicroUsd: cap,
      capDefaulted,
      minBillingSeconds,
      platformFeeBps: input.platformFeeBps,
      estimate: { lowMicroUsd: cost(lowPrice, est.minSeconds), highMicroUsd: cost(highPrice, est.maxSeconds), assumptions, matchedClasses: fit.matchedClasses },
      maxCostMicroUsd: cost(cap, input.maxRuntimeSeconds),
    },
  };
}
