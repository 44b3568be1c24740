import type { JobStatus } from '@gpufarm/shared';

const TONE: Record<JobStatus, string> = {
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

/** A job status as text with a colour that only repeats what the text says. */
export function StatusBadge({ status }: { status: JobStatus }) {
  return <span className={`badge badge-${TONE[status]}`}>{status}</span>;
}
