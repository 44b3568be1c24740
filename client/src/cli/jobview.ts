import { START_PHASES, type Job, type JobStartup } from '@gpufarm/shared';
import { EXIT } from './exit.js';
import { bytesText, usd } from './format.js';

/**
 * The exit code a finished job stands for: 0 when it COMPLETED and its program exited 0, 1 for
 * every other end (FAILED, TIMED_OUT, CANCELED, EXPIRED, or COMPLETED with a non-zero exit code:
 * the run is billed and complete, but the program failed).
 */
export function outcomeExitCode(job: Pick<Job, 'status' | 'assignment'>): number {
  return job.status === 'COMPLETED' && (job.assignment?.exitCode ?? 0) === 0 ? EXIT.ok : EXIT.jobFailed;
}

/** A job for people: status, where it ran, what it cost, its hashes and artifacts. */
export function describeJob(job: Job): string {
  const rows: [string, string][] = [
    ['job', job.id],
    ['status', `${job.status}${job.verificationLevel ? ` (${job.verificationLevel})` : ''}`],
    ['max cost', `${usd(job.pricing.maxCostMicroUsd)} (estimate ${usd(job.pricing.estimateLowMicroUsd)} to ${usd(job.pricing.estimateHighMicroUsd)})`],
    ['payment', `${job.payment.maxPayment} base units of ${job.payment.symbol} at most`],
  ];
  const a = job.assignment;
  if (a) {
    rows.push(['runs on', `${a.gpu.count}× ${a.gpu.model} at ${a.farm.slug} (${a.region}), ${usd(a.pricePerGpuHourMicroUsd)} per GPU-hour`]);
    if (a.exitCode !== null) rows.push(['exit code', String(a.exitCode)]);
  }
  const start = startLine(job.startup ?? null);
  if (start) rows.push(['start', start]);
  if (job.cost) rows.push(['cost', `${usd(job.cost.totalMicroUsd)} (${job.cost.billableGpuSeconds} GPU-seconds, fee ${usd(job.cost.feeMicroUsd)})`]);
  if (job.result) rows.push(['result', `${job.result.serverHash ?? 'no output'}${job.result.hashesMatch ? '' : ' (host and server hashes differ)'}`]);
  if (job.receipt) rows.push(['receipt', `${job.receipt.status}${job.receipt.challengeEndsAt ? `, challenge window ends ${job.receipt.challengeEndsAt}` : ''}`]);
  const r = job.receipt;
  if (r?.status === 'disputed' && r.disputeEndsAt) rows.push(['dispute', `unresolved by ${r.disputeEndsAt}, the whole deposit comes back`]);
  if (r?.disputeOutcome === 'timed_out') rows.push(['dispute', 'timed out: the whole deposit went back']);
  if (r?.withdrawal?.status === 'waiting_withdrawal') rows.push(['withdraw', `${r.withdrawal.amount} base units of ${job.payment.symbol} wait in the escrow: send withdraw(${job.payment.token}) from ${r.withdrawal.wallet}`]);
  for (const art of job.artifacts) rows.push(['artifact', `${art.id} ${art.kind} ${art.filename} ${bytesText(art.sizeBytes)} sha256 ${art.sha256}`]);
  rows.push(['dashboard', job.links.dashboard]);
  return rows.map(([name, value]) => `${name.padEnd(10)}${value}`).join('\n') + '\n';
}

/** The start phases in one line: `queued 24 ms · dispatch 291 ms · pull skipped · container 259 ms · …`; null before the job was queued. */
function startLine(startup: JobStartup | null): string | null {
  if (!startup) return null;
  const parts = START_PHASES.flatMap((name) => {
    const p = startup.phases[name];
    if (p.status === 'done') return [`${name} ${p.durationMs! < 1000 ? `${p.durationMs} ms` : `${(p.durationMs! / 1000).toFixed(1)} s`}`];
    if (p.status === 'pending') return [];
    return [`${name} ${p.status.replace('_', ' ')}`];
  });
  return parts.join(' · ');
}
