import { formatMicroUsd, JOB_SPEC_DEFAULTS, maxPriceMicroUsdOf, jobCreateRequestSchema, requestedVramBytes, type JobCreateRequest, type JobFit, type WorkloadType } from '@gpufarm/shared';
import type { OfferIndex } from '../capacity/offer-index.js';
import type { JobRow } from './store.js';
import { isTerminalStatus } from './transitions.js';

type FitIndex = Pick<OfferIndex, 'summarizeFit'>;

/** The fit of a spec's requirements at `cap` (null: any price), as the dashboard shows it. */
function fitOf(offerIndex: FitIndex, spec: Pick<JobCreateRequest, 'gpu'> & { workloadType: WorkloadType }, cap: number | null): Pick<JobFit, 'fitting' | 'matched' | 'reasons'> {
  const fit = offerIndex.summarizeFit({
    gpuCount: spec.gpu.count,
    minVramBytes: requestedVramBytes(spec.gpu),
    classIds: spec.gpu.modelAllowlist ?? null,
    workloadType: spec.workloadType,
    capMicroUsd: cap,
    provenOnly: spec.gpu.proven === true,
  });
  const reasons =
    fit.matched > 0
      ? []
      : fit.fitting > 0 && cap !== null
        ? [`every machine that fits asks more than the price cap of ${formatMicroUsd(cap)} USD per GPU-hour (the cheapest asks ${formatMicroUsd(fit.minFittingPriceMicroUsd)})`]
        : fit.noFitReasons;
  return { fitting: fit.fitting, matched: fit.matched, reasons };
}

/**
 * Whether the offers in the index now fit the job, from its accepted spec and cap (what the
 * matcher asks of a machine). The job is allowed to wait, since capacity changes: this says why
 * it waits, for the job page.
 */
export function jobFitNow(offerIndex: FitIndex, job: JobRow): JobFit {
  const waiting = !isTerminalStatus(job.status) && job.status !== 'RUNNING';
  const parsed = jobCreateRequestSchema.safeParse(job.spec);
  const gpu = parsed.success ? parsed.data.gpu : { count: job.gpu_count };
  return { object: 'job_fit', jobId: job.id, waiting, ...fitOf(offerIndex, { gpu, workloadType: job.workload_type as WorkloadType }, job.max_price_per_gpu_hour_micro_usd) };
}

/** The same for a spec not created yet (the New job form, before it sends it): at its cap, or at any price without one. */
export function specFitNow(offerIndex: FitIndex, spec: JobCreateRequest): JobFit {
  return { object: 'job_fit', jobId: null, waiting: true, ...fitOf(offerIndex, { gpu: spec.gpu, workloadType: spec.workloadType ?? JOB_SPEC_DEFAULTS.workloadType }, maxPriceMicroUsdOf(spec)) };
}
