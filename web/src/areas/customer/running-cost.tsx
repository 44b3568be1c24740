import { finalCost, type Job } from '@gpufarm/shared';
import { useEffect, useState } from 'react';
import { duration, usd } from '../../lib/format';

/**
 * What a running job has cost so far, billed as its final cost will be (`finalCost`: whole
 * seconds since it started, at least the minimum billed, times its GPUs at the matched price,
 * plus the fee), never above the escrowed maximum. An estimate: the bill counts from the start
 * and end the service receives, so it may differ by a few seconds. Ticks each second.
 */
export function RunningCost({ job }: { job: Job }) {
  const a = job.assignment;
  const startedAt = a?.startedAt ? Date.parse(a.startedAt) : null;
  const [now, setNow] = useState(() => Date.now());
  const running = job.status === 'RUNNING' && startedAt !== null;
  useEffect(() => {
    if (!running) return;
    const timer = setTimeout(() => setNow(Date.now()), 1000 - (Date.now() % 1000));
    return () => clearTimeout(timer);
  }, [running, now]);
  if (!running || !a) return null;
  const runtimeSeconds = Math.max(0, Math.ceil((now - startedAt) / 1000));
  const cost = finalCost({
    runtimeSeconds,
    minBillingSeconds: job.pricing.minBillingSeconds,
    gpuCount: a.gpu.count,
    pricePerGpuHourMicroUsd: a.pricePerGpuHourMicroUsd,
    platformFeeBps: job.pricing.platformFeeBps,
  });
  const total = Math.min(cost.totalMicroUsd, job.pricing.maxCostMicroUsd);
  const minimum = runtimeSeconds < job.pricing.minBillingSeconds ? `, the minimum of ${duration(job.pricing.minBillingSeconds)} billed` : '';
  return (
    <span className="running-cost">
      <strong>{usd(total)}</strong> so far (estimate): {duration(runtimeSeconds)} on {a.gpu.count} GPU{a.gpu.count === 1 ? '' : 's'} at {usd(a.pricePerGpuHourMicroUsd)} per GPU-hour{minimum}, fee included; at most {usd(job.pricing.maxCostMicroUsd)}
    </span>
  );
}
