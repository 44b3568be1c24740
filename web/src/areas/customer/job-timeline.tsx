import { isTerminalStatus, type Job, type JobTimeline, type JobTimelineEvent, type JobTimelineState } from '@gpufarm/shared';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useApi } from '../../lib/api';
import { when } from '../../lib/format';
import { Hash } from '../../ui/hash';
import { ErrorState, Loading } from '../../ui/states';

const STATE_LABEL: Record<JobTimelineState, string> = {
  created: 'Created',
  funded: 'Funded',
  queued: 'Queued',
  assigned: 'Assigned to a machine',
  running: 'Running',
  completed: 'Completed',
  failed: 'Failed',
  timed_out: 'Timed out',
  canceled: 'Canceled',
  expired: 'Expired',
  completion_recorded: 'Completion recorded on the escrow',
  challenge_window_ends: 'Challenge window ends',
  approved: 'Approved early: payment released',
  released: 'Payment released',
  disputed: 'Disputed',
  dispute_deadline: 'Dispute deadline: unresolved by then, the whole deposit comes back',
  resolved: 'Dispute resolved: payment released',
  dispute_timed_out: 'Dispute timed out: the whole deposit went back to you',
  refund_authorized: 'Refund authorized',
  refunded: 'Refunded',
};

/** The job's own states still ahead of a job that has not ended, shown as "not yet". */
const JOB_PATH: readonly JobTimelineState[] = ['created', 'funded', 'queued', 'assigned', 'running'];

/**
 * What makes the timeline worth reading again: the job query polls while the job moves, and a
 * change of any of these fetches the timeline anew.
 */
function movesOf(job: Job) {
  return [job.status, job.assignment?.startedAt ?? null, job.receipt?.status ?? null, job.receipt?.transactions.release ?? null, job.receipt?.transactions.refund ?? null];
}

/** The job's timeline (`GET /dashboard/api/jobs/:id/timeline`), refetched whenever the job moves. */
export function useJobTimeline(job: Job | undefined, id: string) {
  const { jobs } = useApi();
  return useQuery({
    queryKey: ['job', id, 'timeline', ...(job ? movesOf(job) : [])],
    queryFn: () => jobs.timeline(id),
    enabled: job !== undefined,
    placeholderData: keepPreviousData,
  });
}

function Step({ event, now }: { event: JobTimelineEvent; now: number }) {
  const ahead = event.at !== null && Date.parse(event.at) > now;
  const label = STATE_LABEL[event.state];
  return (
    <li className={`event ${ahead ? 'step-todo' : 'step-done'}`}>
      <span className="step-label">{label}</span>
      <span className="visually-hidden">{ahead ? ' (ahead)' : ' (done)'}</span>
      <span className="step-at">{event.at ? <time dateTime={event.at}>{when(event.at)}</time> : 'time not recorded'}</span>
      {event.txHash ? <Hash value={event.txHash} label={`the ${event.state.replace(/_/g, ' ')} transaction hash`} /> : null}
    </li>
  );
}

/** Each state with its time and, for the escrow's, its transaction; the states ahead of a live job as "not yet". */
export function Timeline({ job, timeline }: { job: Job; timeline: ReturnType<typeof useJobTimeline> }) {
  const now = Date.now();
  return (
    <section aria-labelledby="timeline-heading" className="card">
      <h2 id="timeline-heading">Timeline</h2>
      {timeline.isPending ? (
        <Loading label="Loading the timeline…" />
      ) : timeline.isError ? (
        <ErrorState error={timeline.error} title="Could not load the timeline" retry={() => void timeline.refetch()} />
      ) : (
        <TimelineList job={job} timeline={timeline.data} now={now} />
      )}
    </section>
  );
}

/** The timeline's steps as a list, for a page that loaded the timeline itself (the admin's job page). */
export function TimelineList({ job, timeline, now }: { job: Job; timeline: JobTimeline; now: number }) {
  const reached = new Set(timeline.events.map((e) => e.state));
  const ahead = isTerminalStatus(job.status) ? [] : JOB_PATH.filter((state) => !reached.has(state));
  return (
    <ol className="timeline-events">
      {timeline.events.map((event, i) => (
        <Step key={`${event.state}-${i}`} event={event} now={now} />
      ))}
      {ahead.map((state) => (
        <li key={state} className="event step-todo">
          <span className="step-label">{STATE_LABEL[state]}</span>
          <span className="step-at">not yet</span>
        </li>
      ))}
    </ol>
  );
}
