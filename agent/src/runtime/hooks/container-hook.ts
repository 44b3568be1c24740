import { join } from 'node:path';
import { ownContainers, removeContainer } from '../../docker/containers.js';
import { assignmentLabels, LABEL_ASSIGNMENT } from '../../docker/labels.js';
import { JOB_DNS } from '../../egress/network.js';
import { RuntimeError } from '../../job/errors.js';
import { readJson, type JobState } from '../../job/state.js';
import { toContainerConfig } from '../container-config.js';
import type { WaitResult } from '../container-supervisor.js';
import type { RuntimeDeps } from '../deps.js';
import { need, type JobHook } from './hook.js';
import { errorText } from '@gpufarm/shared';

/** The job's container, created (not started) from the image, inputs, /output and network of the hooks before. */
export function containerHook(deps: Pick<RuntimeDeps, 'docker' | 'owner' | 'machine'>): JobHook {
  return {
    name: 'container',
    async prerun(job) {
      const { spec } = job;
      const image = need(job.image, 'image');
      const network = need(job.network, 'network');
      const config = toContainerConfig(spec, deps.machine, {
        name: job.name,
        image: image.reference,
        labels: assignmentLabels(deps.owner, spec.assignmentId, spec.jobId, spec.maxRuntimeSeconds),
        inputs: need(job.inputs, 'inputs'),
        outputHostPath: join(job.dir, 'output'),
        imageUser: image.user,
        ...(network ? { network: { name: network.network, env: network.env, dns: JOB_DNS, sysctls: network.sysctls } } : {}),
      });
      try {
        job.container = await deps.docker.createContainer(config);
      } catch (err) {
        throw new RuntimeError('create_failed', `creating the container failed: ${errorText(err)}`, { cause: err });
      }
      // dockerode: wait() before start() returns at once; 'next-exit' waits for this run's exit.
      // Sent as early as possible so dockerd has it before the start (the supervisor also watches
      // for the end of the logs, should the wait miss a very short run).
      const exited = job.container.wait({ condition: 'next-exit' }) as Promise<WaitResult>;
      exited.catch(() => undefined);
      job.exited = exited;
    },
    async poststop(job) {
      // Every container of the assignment: the one a start names, the one its state names, any labelled with it.
      const ids = new Set<string>([job.name]);
      const state = await readJson<JobState>(join(job.dir, 'state.json'));
      if (state) ids.add(state.containerId);
      for (const c of await ownContainers(deps.docker, deps.owner)) if (c.Labels[LABEL_ASSIGNMENT] === job.assignmentId) ids.add(c.Id);
      for (const id of ids) await removeContainer(deps.docker, id);
    },
  };
}
