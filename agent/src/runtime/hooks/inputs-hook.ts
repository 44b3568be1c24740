import { join } from 'node:path';
import { downloadInputs } from '../inputs.js';
import type { RuntimeDeps } from '../deps.js';
import { need, type JobHook } from './hook.js';

/** The job's inputs, downloaded into its folder (removed with it: no cleanup of its own). */
export function inputsHook(deps: Pick<RuntimeDeps, 'inputHeaders'>): JobHook {
  return {
    name: 'inputs',
    async prerun(job) {
      job.inputs = await downloadInputs(job.spec.inputs, join(job.dir, 'inputs'), need(job.system, 'system'), deps.inputHeaders);
    },
  };
}
