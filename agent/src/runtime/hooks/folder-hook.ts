import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { JobHook } from './hook.js';

/** The assignment's folder (inputs, output, log, state); removing it is the last cleanup. */
export function folderHook(): JobHook {
  return {
    name: 'folder',
    async prerun(job) {
      await mkdir(join(job.dir, 'inputs'), { recursive: true, mode: 0o700 });
    },
    async poststop(job) {
      await rm(job.dir, { recursive: true, force: true });
    },
  };
}
