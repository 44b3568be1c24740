import { join } from 'node:path';
import { RuntimeError } from '../../job/errors.js';
import { writeJson, type JobState } from '../../job/state.js';
import { need, type JobHook } from './hook.js';
import { errorText } from '@gpufarm/shared';

/**
 * Writes `state.json` (what a restarted agent resumes from), then starts the container. No
 * cleanup: the state goes with the folder, the container with the container hook's.
 */
export function startHook(deps: { now: () => number }): JobHook {
  return {
    name: 'start',
    async prerun(job) {
      const image = need(job.image, 'image');
      const output = need(job.output, 'output');
      const container = need(job.container, 'container');
      const state: JobState = {
        spec: job.spec,
        containerId: container.id,
        imageReference: image.reference,
        imageDigest: image.digest,
        outputMount: output.kind,
        outputLimitBytes: output.limitBytes,
        startedAt: new Date(deps.now()).toISOString(),
      };
      await writeJson(join(job.dir, 'state.json'), state);
      try {
        await container.start();
      } catch (err) {
        throw new RuntimeError('create_failed', `starting the container failed: ${errorText(err)}`, { cause: err });
      }
      job.state = state;
    },
  };
}
