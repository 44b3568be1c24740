import { formatMicroUsd, jobCreateRequestSchema, requestedVramBytes, type JobFit, type WorkloadType } from '@gpufarm/shared';
import type { OfferIndex } from '../capacity/offer-index.js';
import type { JobRow } from './store.js';
import { isTerminalStatus } from './transitions.js';


/**
 * Whether the offers in the index now fit the job, from its accepted spec and cap (what the
 * matcher asks of a machine). The job is allowed to wait, since capacity changes: this says why
 * it waits, for the job page.
 */
export function jobFitNow(offerIndex: Pick<OfferIndex, 'summarizeFit'>, job: JobRow): JobFit {
  const waiting = !isTerminalStatus(job.status) && job.status !== 'RUNNING';
  const parsed = jobCreateRequestSchema.safeParse(job.spec);
  const gpu = parsed.success ? parsed.data.gpu : { count: job.gpu_count };
  const cap = job.max_price_per_gpu_hour_micro_usd;
  const fit = offerIndex.summarizeFit({
    gpuCount: job.gpu_count,
    minVramBytes: parsed.success ? requestedVramBytes(parsed.data.gpu) : null,
    classIds: parsed.success ? (parsed.data.gpu.modelAllowlist ?? null) : null,
    workloadType: job.workload_type as WorkloadType,
    capMicroUsd: cap,
    provenOnly: 'proven' in gpu && gpu.proven === true,
  });
  const reasons =
    fit.matched > 0
      ? []
      : fit.fitting > 0
        ? [`every machine that fits asks more than the price cap of ${formatMicroUsd(cap)} USD per GPU-hour (the cheapest asks ${formatMicroUsd(fit.minFittingPriceMicroUsd)})`]
        : fit.noFitReasons;
  return { object: 'job_fit', jobId: job.id, waiting, fitting: fit.fitting, matched: fit.matched, reasons };
}
