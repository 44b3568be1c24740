import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { AssignmentSpec } from '@gpufarm/shared';

/**
 * What the runtime keeps on disk per assignment, in `<stateDir>/assignments/<assignmentId>/`:
 * `state.json` (below), `exit.json` once the container exited (`JobExit`), `log.jsonl` and its
 * tail segments `log.jsonl.<seq>.<offset>` (the job's log, one JSON object per line; see
 * `LogFile`), `log-artifact.jsonl` (what is uploaded when the log was cut), `inputs/`, `output/`
 * (the mount) and `output.img`.
 * A restarted agent rebuilds its jobs from these files and the containers' labels.
 */
export interface JobState {
  spec: AssignmentSpec;
  containerId: string;
  imageReference: string;
  imageDigest: string;
  outputMount: 'loop' | 'watchdog';
  outputLimitBytes: number;
  /** When the container started (ISO); the runtime limit counts from here. */
  startedAt: string;
}

/** How a job ended. `exitCode` is null when the container vanished without an exit code. */
export interface JobExit {
  assignmentId: string;
  exitCode: number | null;
  /** Out of memory: Docker's OOMKilled, or exit 137 the agent did not cause (OOMKilled can stay false when the OOM killer ends the container's first process). */
  oomKilled: boolean;
  /** Stopped at maxRuntimeSeconds. */
  timedOut: boolean;
  /** Stopped by `cancel` (customer or control plane). */
  canceled: boolean;
  /** Stopped by the output watchdog for writing more than the outputs' limit. */
  outputLimitExceeded: boolean;
  startedAt: string;
  finishedAt: string;
  imageDigest: string;
}

export function jobDir(stateDir: string, assignmentId: string): string {
  return join(stateDir, 'assignments', assignmentId);
}

export async function writeJson(path: string, value: unknown): Promise<void> {
  await mkdir(join(path, '..'), { recursive: true });
  await writeFile(`${path}.tmp`, `${JSON.stringify(value, null, 2)}\n`, { mode: 0o600 });
  await rename(`${path}.tmp`, path);
}

export async function readJson<T>(path: string): Promise<T | null> {
  try {
    return JSON.parse(await readFile(path, 'utf8')) as T;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}
