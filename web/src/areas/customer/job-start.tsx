import { START_PHASES, type Job, type StartPhase, type StartPhaseName, type StartPhaseStatus } from '@gpufarm/shared';
import { millis, when } from '../../lib/format';
import { Table, type Column } from '../../ui/table';

const PHASE_LABEL: Record<StartPhaseName, string> = {
  queued: 'Queued',
  dispatch: 'Sent to the machine',
  pull: 'Image pull',
  container: 'Container made and started',
  firstLog: 'First log line',
  run: 'Run',
  upload: 'Outputs and log uploaded',
};

/** What a phase covers, in a few words (docs/customers/jobs-and-funding.md says it at length). */
const PHASE_COVERS: Record<StartPhaseName, string> = {
  queued: 'waiting for a machine that fits',
  dispatch: 'the offer reaching the machine, its checks',
  pull: 'fetching the image',
  container: 'inputs, /output, network, create and start',
  firstLog: 'from running to the job’s first own line',
  run: 'from running to the container’s end',
  upload: 'packing, hashing and uploading',
};

/** Why a phase was skipped: the only reasons the service records. */
const SKIPPED_WHY: Partial<Record<StartPhaseName, string>> = {
  pull: 'the machine already had the image',
  firstLog: 'the job wrote no line',
  container: 'not reported by this machine’s agent',
  run: 'not reported by the machine',
};

const STATUS_BADGE: Record<StartPhaseStatus, { label: string; tone: string }> = {
  done: { label: 'done', tone: 'ok' },
  in_progress: { label: 'in progress', tone: 'run' },
  pending: { label: 'not started', tone: 'off' },
  skipped: { label: 'skipped', tone: 'off' },
  not_reached: { label: 'not reached', tone: 'bad' },
};

interface Row {
  name: StartPhaseName;
  phase: StartPhase;
}

function took({ name, phase }: Row): string {
  switch (phase.status) {
    case 'done':
      return millis(phase.durationMs);
    case 'in_progress':
      return phase.startedAt ? `for ${millis(Math.max(0, Date.now() - Date.parse(phase.startedAt)))} so far` : '—';
    case 'skipped':
      return SKIPPED_WHY[name] ?? 'skipped';
    case 'not_reached':
      return phase.startedAt ? 'began; the run ended before it did' : 'the run ended before it';
    default:
      return 'not yet';
  }
}

const COLUMNS: Column<Row>[] = [
  { header: 'Phase', cell: ({ name }) => <span className="step-label">{PHASE_LABEL[name]}</span> },
  {
    header: 'Status',
    cell: ({ phase }) => <span className={`badge badge-${STATUS_BADGE[phase.status].tone}`}>{STATUS_BADGE[phase.status].label}</span>,
  },
  { header: 'Took', cell: took },
  { header: 'Began', cell: ({ phase }) => (phase.startedAt ? <time dateTime={phase.startedAt}>{when(phase.startedAt)}</time> : <span className="muted">—</span>) },
  { header: 'Covers', cell: ({ name }) => <span className="muted">{PHASE_COVERS[name]}</span>, className: 'start-covers' },
];

/**
 * The job's start, phase by phase (`job.startup`, the service's clock as it received the
 * machine's reports): the latest run's, or the wait while the job is queued. Nothing before the
 * job was first queued.
 */
export function JobStart({ job }: { job: Job }) {
  const startup = job.startup;
  if (!startup) return null;
  const rows = START_PHASES.map((name) => ({ name, phase: startup.phases[name] }));
  // Queued through container add up to the start (the service keeps their boundaries in order).
  const toRunning = ['queued', 'dispatch', 'pull', 'container'] as const;
  const total = startup.phases.run.startedAt !== null ? toRunning.reduce((sum, p) => sum + (startup.phases[p].durationMs ?? 0), 0) : null;
  return (
    <section aria-labelledby="start-heading" className="card">
      <h2 id="start-heading">Start</h2>
      <p className="muted">
        {total !== null
          ? `Running ${millis(total)} after it was queued${startup.phases.pull.status === 'skipped' ? ', without a pull: the machine had the image' : ''}.`
          : startup.assignmentId === null
            ? 'Waiting in the queue for a machine.'
            : 'Starting on its machine.'}
        {startup.attempt !== null && startup.attempt > 1 ? ` Run ${startup.attempt} of this job: the earlier runs did not finish.` : ''}
      </p>
      <Table caption="The job's start phases" columns={COLUMNS} rows={rows} rowKey={(r) => r.name} />
    </section>
  );
}
