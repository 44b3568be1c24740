import type Docker from 'dockerode';
import { LABEL_EGRESS, ownerFilter } from './labels.js';

/** Every container of this owner but its egress proxies (`egress/network.ts` keeps those), running or not. */
export async function ownContainers(docker: Docker, owner: string): Promise<Docker.ContainerInfo[]> {
  const all = await docker.listContainers({ all: true, filters: ownerFilter(owner) });
  return all.filter((c) => c.Labels[LABEL_EGRESS] === undefined);
}

/** Removes a container (by id or name) with its anonymous volumes; one already gone, or being removed, is fine. */
export async function removeContainer(docker: Docker, id: string): Promise<void> {
  try {
    await docker.getContainer(id).remove({ force: true, v: true });
  } catch (err) {
    const code = (err as { statusCode?: number }).statusCode;
    if (code !== 404 && code !== 409) throw err;
  }
}
