import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { prepareOutputMount, releaseOutputMount } from '../output-mount.js';
import type { RuntimeDeps } from '../deps.js';
import type { JobHook } from './hook.js';

/**
 * /output: the mount (mkfs) starts here and goes on while the image is pulled, the inputs are
 * downloaded and the container is created (a bind mount resolves its source at start, not at
 * create); the user hook awaits it.
 */
export function outputHook(deps: Pick<RuntimeDeps, 'allowLoopMounts'>): JobHook {
  return {
    name: 'output',
    async prerun(job) {
      await mkdir(join(job.dir, 'output'), { recursive: true });
      job.outputReady = prepareOutputMount(job.dir, job.spec.outputRules, { allowLoop: deps.allowLoopMounts });
      job.outputReady.catch(() => undefined);
    },
    async poststop(job) {
      // A mount still being made is finished first, so nothing of it stays.
      if (job.outputReady) await job.outputReady.catch(() => undefined);
      await releaseOutputMount(job.dir);
    },
  };
}
