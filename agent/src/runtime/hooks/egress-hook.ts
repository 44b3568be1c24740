import { removeEgress, startEgress } from '../../egress/network.js';
import type { RuntimeDeps } from '../deps.js';
import { need, type JobHook } from './hook.js';

/** An allowlist job's internal network and proxy (`egress/network.ts`); other jobs have none. */
export function egressHook(deps: Pick<RuntimeDeps, 'docker' | 'owner' | 'machine'>): JobHook {
  return {
    name: 'egress',
    async prerun(job) {
      const { spec } = job;
      const { egress } = deps.machine;
      job.network = spec.networkPolicy.mode === 'allowlist' && egress
        ? await startEgress(deps.docker, egress, { owner: deps.owner, assignmentId: spec.assignmentId, jobId: spec.jobId, allow: spec.networkPolicy.allow }, need(job.system, 'system'))
        : null;
    },
    async poststop(job) {
      // Also for a job without an allowlist: nothing to remove is fine, and a half-made one goes.
      await removeEgress(deps.docker, deps.owner, job.assignmentId);
    },
  };
}
