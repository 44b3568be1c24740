/**
 * A machine's state and health verdict, as one table of rules over the facts of its row. The
 * admin table, the operator area and the GPU health view read them here; the control plane's SQL
 * (`machines/state-store.ts`) is written from the same rules, so a filter or a count in the
 * database never disagrees with a machine shown (a test compares the two over every combination).
 */

/** `draining`: asked to drain and still running a job; `drained`: asked to drain, with nothing left running. */
export const MACHINE_STATES = ['online', 'busy', 'draining', 'drained', 'offline', 'failed', 'cordoned'] as const;
type State = (typeof MACHINE_STATES)[number];
type Verdict = 'healthy' | 'warning' | 'failed';

/** The facts of a machine's row that its state and verdict read. */
export interface MachineStateFacts {
  /** `machines.status`. */
  status: 'online' | 'unhealthy' | 'draining' | 'offline' | 'disabled';
  cordoned: boolean;
  drainRequested: boolean;
  /** Its offered GPUs, those judged failed, and those judged warning or failed. */
  gpus: number;
  failedGpus: number;
  troubledGpus: number;
  /** Whether any of its GPUs is reserved (by an assignment, or held for one the agent still runs). */
  busy: boolean;
}

export const MACHINE_FACTS = ['offline', 'unusable', 'cordoned', 'drain', 'busy', 'troubled'] as const;
export type MachineFact = (typeof MACHINE_FACTS)[number];

/** Each fact read from the facts of a row (the SQL writes each the same way). */
export const MACHINE_FACT_TESTS: Readonly<Record<MachineFact, (f: MachineStateFacts) => boolean>> = {
  /** Not connected, or unenrolled. */
  offline: (f) => f.status === 'offline' || f.status === 'disabled',
  /** Its agent reports it unhealthy, or no GPU of it can be offered (none, or every one failed). */
  unusable: (f) => f.status === 'unhealthy' || f.gpus === 0 || f.failedGpus >= f.gpus,
  cordoned: (f) => f.cordoned,
  /** Asked to drain (by an admin or its farm), or draining by its agent's own report. */
  drain: (f) => f.drainRequested || f.status === 'draining',
  busy: (f) => f.busy,
  troubled: (f) => f.troubledGpus > 0,
};

/**
 * The state: the first rule whose facts all hold. Offline before failed before cordoned before
 * draining or drained before busy: what keeps it from work first.
 */
export const MACHINE_STATE_RULES: ReadonlyArray<readonly [State, readonly MachineFact[]]> = [
  ['offline', ['offline']],
  ['failed', ['unusable']],
  ['cordoned', ['cordoned']],
  ['draining', ['drain', 'busy']],
  ['drained', ['drain']],
  ['busy', ['busy']],
  ['online', []],
];

/** The verdict: failed when it cannot be offered, warning when any GPU warns or failed, else healthy. */
export const MACHINE_VERDICT_RULES: ReadonlyArray<readonly [Verdict, readonly MachineFact[]]> = [
  ['failed', ['unusable']],
  ['warning', ['troubled']],
  ['healthy', []],
];

function firstRule<T>(rules: ReadonlyArray<readonly [T, readonly MachineFact[]]>, facts: MachineStateFacts): T {
  for (const [answer, when] of rules) if (when.every((fact) => MACHINE_FACT_TESTS[fact](facts))) return answer;
  throw new Error('no rule matched: the last rule must have no facts');
}

export function machineState(facts: MachineStateFacts): State {
  return firstRule(MACHINE_STATE_RULES, facts);
}

export function machineVerdict(facts: MachineStateFacts): Verdict {
  return firstRule(MACHINE_VERDICT_RULES, facts);
}
