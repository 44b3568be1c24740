import { START_PHASES, type JobStartup, type StartPhase, type StartPhaseName } from '@gpufarm/shared';

/**
 * A run's start and end, phase by phase (issue 34, item 4), from the times the control plane
 * received each report (`phases/store.ts`). Pure: the job object, the machine pages' figures and
 * the Prometheus histograms all read phases through `startupOf`, so they agree.
 */

/** When the control plane saw each boundary of one assignment's run; null: not (yet) seen. */
export interface PhaseTimes {
  queuedAt: Date;
  matchedAt: Date;
  pullStartedAt: Date | null;
  imageReadyAt: Date | null;
  runningAt: Date | null;
  firstLogAt: Date | null;
  exitedAt: Date | null;
  finishedAt: Date | null;
}

/** One assignment's times, and whether it is over (no longer offered, accepted or running). */
export interface PhaseRun {
  assignmentId: string;
  attempt: number;
  times: PhaseTimes;
  ended: boolean;
}

/** The chain of boundaries, in order; the phase between two is named after its start. */
const CHAIN = ['queuedAt', 'matchedAt', 'pullStartedAt', 'imageReadyAt', 'runningAt', 'exitedAt', 'finishedAt'] as const satisfies ReadonlyArray<keyof PhaseTimes>;
const CHAIN_PHASES: ReadonlyArray<Exclude<StartPhaseName, 'firstLog'>> = ['queued', 'dispatch', 'pull', 'container', 'run', 'upload'];

const PENDING: StartPhase = { status: 'pending', startedAt: null, endedAt: null, durationMs: null };

/**
 * The phases of a run. Each boundary is taken no earlier than the one before it (times written
 * by the database and by the server process may differ by a few milliseconds), so durations
 * are never negative and `queued` through `container` add up to exactly running − queued.
 * A boundary never seen while a later one was is a phase skipped (no `pulling` when the machine
 * held the image: `pull` is skipped and `dispatch` runs to the container's making), and the
 * phase before it runs on to the next boundary seen. Phases of a run that ended before them are
 * `not_reached`.
 */
export function startupOf(run: PhaseRun): JobStartup {
  const at: Array<Date | null> = [];
  let floor = 0;
  for (const key of CHAIN) {
    const t = run.times[key];
    if (t === null) {
      at.push(null);
      continue;
    }
    floor = Math.max(floor, t.getTime());
    at.push(new Date(floor));
  }
  const lastSeen = at.reduce((last, t, i) => (t ? i : last), -1);
  const phases = {} as Record<StartPhaseName, StartPhase>;
  CHAIN_PHASES.forEach((name, i) => {
    const start = at[i]!;
    const endIndex = at.findIndex((t, j) => j > i && t !== null);
    if (start === null) {
      phases[name] = endIndex >= 0 ? { ...PENDING, status: 'skipped' } : { ...PENDING, status: run.ended ? 'not_reached' : 'pending' };
      return;
    }
    if (endIndex < 0) {
      phases[name] = { status: run.ended ? 'not_reached' : 'in_progress', startedAt: start.toISOString(), endedAt: null, durationMs: null };
      return;
    }
    phases[name] = done(start, at[endIndex]!);
  });
  phases.firstLog = firstLogOf(run, at[CHAIN.indexOf('runningAt')] ?? null, lastSeen >= CHAIN.indexOf('exitedAt'));
  return { assignmentId: run.assignmentId, attempt: run.attempt, phases: orderPhases(phases) };
}

/**
 * The wait of a job in QUEUED (first queued, or queued again after a run that failed): only
 * `queued` has begun; the rest wait for a match.
 */
export function queuedStartup(queuedAt: Date): JobStartup {
  const phases = Object.fromEntries(START_PHASES.map((p) => [p, PENDING])) as Record<StartPhaseName, StartPhase>;
  phases.queued = { status: 'in_progress', startedAt: queuedAt.toISOString(), endedAt: null, durationMs: null };
  return { assignmentId: null, attempt: null, phases: orderPhases(phases) };
}

/** Phases that are `done` in `after` and were not in `before`, with their seconds (what the histograms observe). */
export function phasesDone(before: JobStartup | null, after: JobStartup): Array<{ phase: StartPhaseName; seconds: number }> {
  return START_PHASES.filter((p) => after.phases[p].status === 'done' && before?.phases[p].status !== 'done').map((p) => ({
    phase: p,
    seconds: after.phases[p].durationMs! / 1000,
  }));
}

/** From running to the job's first own line, taken no earlier than running; skipped when the container ended and the run is over without one. */
function firstLogOf(run: PhaseRun, running: Date | null, exited: boolean): StartPhase {
  const line = run.times.firstLogAt;
  if (running === null) return { ...PENDING, status: run.ended ? 'not_reached' : 'pending' };
  if (line !== null) return done(running, new Date(Math.max(line.getTime(), running.getTime())));
  const over = run.ended || run.times.finishedAt !== null;
  if (over) return { status: exited ? 'skipped' : 'not_reached', startedAt: running.toISOString(), endedAt: null, durationMs: null };
  return { status: 'in_progress', startedAt: running.toISOString(), endedAt: null, durationMs: null };
}

function done(start: Date, end: Date): StartPhase {
  return { status: 'done', startedAt: start.toISOString(), endedAt: end.toISOString(), durationMs: end.getTime() - start.getTime() };
}

/** The phases in `START_PHASES` order (JSON keeps insertion order: the API shows them as they happen). */
function orderPhases(phases: Record<StartPhaseName, StartPhase>): JobStartup['phases'] {
  return Object.fromEntries(START_PHASES.map((p) => [p, phases[p]])) as JobStartup['phases'];
}

