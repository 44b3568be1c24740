import { ensureImage, imageRunName } from '../../docker/image.js';
import type { RuntimeDeps } from '../deps.js';
import { need, type JobHook } from './hook.js';

/**
 * The job's image on the machine; a pull is recorded in the image cache before anything runs
 * from it. No cleanup: images stay, the image cache decides when they go.
 */
export function imageHook(deps: Pick<RuntimeDeps, 'docker' | 'images'>): JobHook {
  return {
    name: 'image',
    async prerun(job) {
      const { spec } = job;
      const image = await ensureImage(deps.docker, spec.image, spec.imageDigest, need(job.system, 'system'), () => job.phase?.('pulling'));
      if (image.pulled) await deps.images?.pulled(spec.assignmentId, imageRunName(spec.image, spec.imageDigest), image);
      job.phase?.('starting');
      job.image = image;
    },
  };
}
