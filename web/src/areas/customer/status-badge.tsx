import type { Job, JobStatus } from '@gpufarm/shared';

type Tone = 'wait' | 'run' | 'ok' | 'bad' | 'off';

const TONE: Record<JobStatus, Tone> = {
  CREATED: 'wait',
  FUNDED: 'wait',
  QUEUED: 'wait',
  MATCHING: 'wait',
  RUNNING: 'run',
  COMPLETED: 'ok',
  FAILED: 'bad',
  TIMED_OUT: 'bad',
  CANCELED: 'off',
  EXPIRED: 'off',
};

/**
 * What a job's badge says: its status, except where the escrow has moved on from it. A completed
 * job is then RELEASED (paid out), DISPUTED (held), RESOLVED (a dispute decided or timed out);
 * any job whose deposit went back is REFUNDED. A failed or timed-out job keeps its status: the
 * failure is what its owner must see first.
 */
export function jobBadge(job: Pick<Job, 'status' | 'receipt'>): { label: string; tone: Tone } {
  const r = job.receipt;
  if (r?.status === 'refunded') return { label: 'REFUNDED', tone: 'off' };
  if (job.status === 'COMPLETED' && r) {
    if (r.status === 'disputed') return { label: 'DISPUTED', tone: 'wait' };
    if (r.status === 'released') return r.disputeOutcome ? { label: 'RESOLVED', tone: 'ok' } : { label: 'RELEASED', tone: 'ok' };
  }
  return { label: job.status, tone: TONE[job.status] };
}

/** A job's state (its status, or where its escrow is) as text with a colour that only repeats what the text says. */
export function StatusBadge({ job }: { job: Pick<Job, 'status' | 'receipt'> }) {
  const badge = jobBadge(job);
  return <span className={`badge badge-${badge.tone}`}>{badge.label}</span>;
}
