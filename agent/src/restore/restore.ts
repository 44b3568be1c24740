import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { AssignmentSpec } from '@gpufarm/shared';
import { reconcileEgress } from '../egress/network.js';
import type { DockerRuntime, JobHandle } from '../runtime/docker-runtime.js';
import type { JobExit } from '../job/state.js';
import { LABEL_ASSIGNMENT } from '../docker/labels.js';
import type { LogSink } from '../docker/log-lines.js';

export interface RestoreOptions {
  /** The sink for an assignment's lines (the link's spool for it). */
  sinkFor: (spec: AssignmentSpec) => LogSink;
  /**
   * The cursor of the last line the link already holds for the assignment (its spool's last
   * container line), or null to resume after the last line of the runtime's own log file.
   */
  cursorFor?: (assignmentId: string) => string | null;
  /**
   * Whether an assignment is still wanted (the daemon's own records, or what the control plane
   * said). Default: every assignment the runtime has state for.
   */
  owns?: (assignmentId: string) => boolean;
}

export interface RestoreResult {
  /** Jobs supervised again: running ones go on, exited ones settle `done` at once with their exit. */
  jobs: JobHandle[];
  /** Assignments that exited and whose results are not released yet, with no container left (outputs remain on disk). */
  finished: Array<{ spec: AssignmentSpec; exit: JobExit; outputDir: string; logFile: string }>;
  /** Assignments that cannot be resumed (no container and no exit, or a container that never started): report them `lost`. */
  lost: AssignmentSpec[];
  /** Containers removed because no assignment owns them (their ids). */
  removed: string[];
}

/**
 * Rebuilds the runtime's jobs after an agent restart: finds this owner's containers by label,
 * resumes supervision of those an assignment owns (lines continue after the last one
 * delivered, without duplicates; the runtime limit counts from the container's start),
 * reports the ones that exited meanwhile with their exit codes, and removes labelled
 * containers nobody owns together with their mounts and folders (the runtime's `release`: the
 * cleanups of the hooks that made them). It never re-runs a job.
 * An allowlist job's proxy and network stay for the jobs resumed (removed when they end) and
 * are removed for every other assignment.
 */
export async function restoreJobs(runtime: DockerRuntime, opts: RestoreOptions): Promise<RestoreResult> {
  const result: RestoreResult = { jobs: [], finished: [], lost: [], removed: [] };
  const owns = opts.owns ?? (() => true);
  const containers = await runtime.listContainers();
  const seen = new Set<string>();
  for (const c of containers) {
    const assignmentId = c.Labels[LABEL_ASSIGNMENT] ?? '';
    const state = assignmentId ? await runtime.readState(assignmentId) : null;
    if (!state || state.containerId !== c.Id || !owns(assignmentId) || seen.has(assignmentId)) {
      await runtime.removeContainer(c.Id);
      if (assignmentId && !seen.has(assignmentId) && (!state || !owns(assignmentId))) await runtime.release(assignmentId);
      result.removed.push(c.Id);
      continue;
    }
    seen.add(assignmentId);
    if (c.State === 'created') {
      // Created but never started (the agent died in between): it never ran, and re-running
      // is the control plane's call, not ours.
      await runtime.removeContainer(c.Id);
      result.removed.push(c.Id);
      result.lost.push(state.spec);
      await runtime.release(assignmentId);
      continue;
    }
    const handle = await runtime.resume(state, opts.sinkFor(state.spec), { sinkAfter: opts.cursorFor?.(assignmentId) ?? null });
    result.jobs.push(handle);
  }
  // Folders without a container: finished and awaiting upload, or lost.
  let names: string[] = [];
  try {
    names = await readdir(join(runtime.deps.stateDir, 'assignments'));
  } catch {
    // No state yet.
  }
  for (const assignmentId of names) {
    if (seen.has(assignmentId)) continue;
    const state = await runtime.readState(assignmentId);
    if (!state) {
      await runtime.release(assignmentId);
      continue;
    }
    if (!owns(assignmentId)) {
      await runtime.release(assignmentId);
      continue;
    }
    const exit = await runtime.readExit(assignmentId);
    const dir = runtime.dirOf(assignmentId);
    if (exit) result.finished.push({ spec: state.spec, exit, outputDir: join(dir, 'output'), logFile: join(dir, 'log.jsonl') });
    else result.lost.push(state.spec);
  }
  const resumed = new Set(result.jobs.map((j) => j.assignmentId));
  await reconcileEgress(runtime.deps.docker, runtime.deps.owner, (id) => resumed.has(id));
  return result;
}
