import { statfsSync } from 'node:fs';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { DEFAULT_IMAGE_CACHE_SHARE } from '../config/config.js';
import { ImageCache } from '../image-cache/image-cache.js';
import { hostPlatform, insecureRegistryHosts, registryImage } from '../image-cache/registry-size.js';
import { diskFree } from './runner-setup.js';
import { errorText } from '@gpufarm/shared';
import type { AgentLog } from '../logger/logger.js';

export interface ImageCacheSetup {
  docker: Docker;
  stateDir: string;
  /** Where the budget's default is measured when Docker's data root cannot be read. */
  workDir: string;
  /** `image_cache_bytes`; null: `DEFAULT_IMAGE_CACHE_SHARE` of the data root's file system. */
  budgetBytes: number | null;
  prepullImages: readonly string[];
  /** The images the runner's assignments need (set once the runner exists). */
  inUse: () => readonly string[];
  log: AgentLog;
}

/**
 * The daemon's image cache, wired once in `gf-agent run`: its index in the state dir, the
 * budget (set, or half of the disk that holds Docker's images, as `docker info` names its data
 * root), sizes from the registries Docker pulls from (plain HTTP for the registries Docker
 * calls insecure), and the free space of the data root.
 */
export async function openImageCache(setup: ImageCacheSetup): Promise<ImageCache> {
  // Docker down at start: the agent still starts (the runtime fails its jobs until Docker is back).
  const info = (await setup.docker.info().catch((err: unknown) => {
    setup.log.warn(`image cache: docker info failed (${errorText(err)}); measuring the work dir's disk, every registry over HTTPS`);
    return {};
  })) as { DockerRootDir?: string; RegistryConfig?: Parameters<typeof insecureRegistryHosts>[0]['RegistryConfig'] };
  const root = info.DockerRootDir ?? '/var/lib/docker';
  // The agent in a container may not see the data root: the work dir's disk is the nearest guess.
  const measured = fileSystemBytes(root) ?? fileSystemBytes(setup.workDir);
  const budgetBytes = setup.budgetBytes ?? Math.floor((measured ?? 0) * DEFAULT_IMAGE_CACHE_SHARE);
  const insecure = insecureRegistryHosts(info);
  const platform = hostPlatform();
  const cache = await ImageCache.open({
    docker: setup.docker,
    file: join(setup.stateDir, 'image-cache.json'),
    budgetBytes,
    lookup: (reference) => registryImage(reference, { insecure, platform }),
    inUse: setup.inUse,
    prepullImages: setup.prepullImages,
    diskFree: () => diskFree(root),
    log: setup.log,
  });
  setup.log.info(`image cache: ${cache.list().length} images, ${cache.usedBytes} of ${budgetBytes} bytes (image_cache_bytes${setup.budgetBytes === null ? `, half of ${root}'s file system` : ''})`);
  return cache;
}

function fileSystemBytes(path: string): number | null {
  try {
    const s = statfsSync(path);
    return s.blocks * s.bsize;
  } catch {
    return null;
  }
}
