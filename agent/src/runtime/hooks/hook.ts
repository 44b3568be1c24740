import type Docker from 'dockerode';
import type { AssignmentSpec } from '@gpufarm/shared';
import type { ResolvedImage } from '../../docker/image.js';
import type { LogSink } from '../../docker/log-lines.js';
import type { EgressSetup } from '../../egress/network.js';
import { RuntimeError } from '../../job/errors.js';
import type { JobState } from '../../job/state.js';
import type { WaitResult } from '../container-supervisor.js';
import type { downloadInputs } from '../inputs.js';
import type { LogFile } from '../log-file.js';
import type { OutputMount } from '../output-mount.js';
import type { SuperviseOptions } from '../deps.js';

/**
 * A job's setup as hooks (after Nomad's task-runner hooks): each step of `start` is a hook whose
 * `prerun` sets its part up and whose `poststop` removes it. A failed start runs the poststops
 * of the steps begun, last first; `release` (and `restore/`, for assignments nobody owns) runs
 * all of them, so the teardown is written once, beside the setup it undoes.
 */

/** What every hook knows of an assignment: enough to remove what its start made, also after an agent restart. */
export interface JobRef {
  assignmentId: string;
  /** The assignment's folder (`jobDir`). */
  dir: string;
  /** Its container's name (`containerName`). */
  name: string;
}

/** What the hooks of a start made so far, one slot per hook; release and restore know none of them. */
export interface JobSlots {
  /** log hook */
  log?: LogFile;
  /** log hook: writes an agent line to the log file, then the sink. */
  system?: (line: string) => void;
  /** output hook: /output, mounting while the later steps run (awaited by the user hook). */
  outputReady?: Promise<OutputMount>;
  /** image hook */
  image?: ResolvedImage;
  /** inputs hook */
  inputs?: Awaited<ReturnType<typeof downloadInputs>>;
  /** egress hook: the job's internal network and proxy, null without an allowlist. */
  network?: EgressSetup | null;
  /** container hook */
  container?: Docker.Container;
  /** container hook: the container's next exit, asked for before it starts. */
  exited?: Promise<WaitResult>;
  /** user hook: /output, mounted and given to the job's user. */
  output?: OutputMount;
  /** start hook: what `state.json` says. */
  state?: JobState;
}

/** A start in progress. */
export interface JobSetup extends JobRef, JobSlots {
  spec: AssignmentSpec;
  sink: LogSink;
  phase?: SuperviseOptions['phase'];
}

export interface JobHook {
  readonly name: string;
  /** Sets the step up. It may leave part of its work behind when it throws: its poststop runs then too. */
  prerun?(job: JobSetup): Promise<void>;
  /** Removes what the prerun made, whatever part of it exists (nothing is fine). */
  poststop?(job: JobRef & JobSlots): Promise<void>;
}

/** A hook, or hooks whose preruns run at once (the pull beside the downloads). */
export type HookStep = JobHook | readonly JobHook[];

function hooksOf(step: HookStep): readonly JobHook[] {
  return Array.isArray(step) ? (step as readonly JobHook[]) : [step as JobHook];
}

/** The values of settled promises, or the first rejection's reason thrown. */
export function settled<T extends readonly unknown[]>(results: { [K in keyof T]: PromiseSettledResult<T[K]> }): T {
  const failed = (results as readonly PromiseSettledResult<unknown>[]).find((r) => r.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
  return (results as readonly PromiseSettledResult<unknown>[]).map((r) => (r as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/** A slot an earlier hook fills; its absence is a wrong hook order, not a job's fault. */
export function need<T>(value: T | undefined, slot: keyof JobSlots): T {
  if (value === undefined) throw new RuntimeError('internal', `job setup: ${slot} is not set up yet (hook order)`);
  return value;
}

/**
 * Runs the preruns in order, a group's together (its first failure in the group's order is
 * thrown once all of them settled). When one throws, the poststop of every hook begun, the
 * failed ones included, runs last first with its errors ignored; then the error is rethrown.
 */
export async function runPreruns(steps: readonly HookStep[], job: JobSetup): Promise<void> {
  const begun: JobHook[] = [];
  try {
    for (const step of steps) {
      const group = hooksOf(step);
      begun.push(...group);
      settled(await Promise.allSettled(group.map(async (hook) => hook.prerun?.(job))));
    }
  } catch (err) {
    await runPoststops(begun, job, { ignoreErrors: true });
    throw err;
  }
}

/** Runs the poststop of every hook, last first; the first error stops them unless `ignoreErrors`. */
export async function runPoststops(steps: readonly HookStep[], job: JobRef & JobSlots, opts: { ignoreErrors?: boolean } = {}): Promise<void> {
  const hooks = steps.flatMap(hooksOf).reverse();
  for (const hook of hooks) {
    if (!hook.poststop) continue;
    if (opts.ignoreErrors) await hook.poststop(job).catch(() => undefined);
    else await hook.poststop(job);
  }
}
