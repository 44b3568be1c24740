import { RuntimeError } from '../../job/errors.js';
import { jobIdsIn } from '../container-files.js';
import { jobUser } from '../job-user.js';
import { giveOutputTo } from '../output-mount.js';
import { need, settled, type JobHook } from './hook.js';
import { errorText } from '@gpufarm/shared';

/**
 * The job's user: the ids of the image's USER, read from the created container (Docker resolves
 * the same name at start), become the owner of /output once it is mounted. No cleanup: /output
 * is the output hook's.
 */
export function userHook(): JobHook {
  return {
    name: 'user',
    async prerun(job) {
      const image = need(job.image, 'image');
      const system = need(job.system, 'system');
      const user = jobUser(image.user);
      const [output, ids] = settled(await Promise.allSettled([need(job.outputReady, 'outputReady'), jobIdsIn(need(job.container, 'container'), user)]));
      system(output.kind === 'loop'
        ? `/output is a ${output.limitBytes}-byte filesystem (loop-mounted ext4${output.nosymfollow ? ', nosymfollow' : ''}): writes past it fail`
        : `/output limited to ${output.limitBytes} bytes by a watchdog (${output.reason}): the job is stopped past it`);
      const given = await giveOutputTo(output.dir, ids).catch((err: unknown) => {
        throw new RuntimeError('create_failed', `giving /output to ${ids.uid}:${ids.gid} failed: ${errorText(err)}`, { cause: err });
      });
      system(`runs as ${ids.uid}:${ids.gid} (${image.user.trim() === '' ? 'the image names no USER' : `the image's USER ${user}`})${given
        ? ', the owner of /output'
        : '; /output is open to every user (the agent is not root, so it cannot give it away)'}`);
      job.output = output;
    },
  };
}
