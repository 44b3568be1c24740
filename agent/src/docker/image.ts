import type Docker from 'dockerode';
import { RuntimeError } from '../job/errors.js';
import { PullProgress, type PullEvent } from './pull-progress.js';
import { errorText } from '@gpufarm/shared';

/** An image reference split into its repository, tag and digest (`host:port/a/b:tag@sha256:…`). */
export interface ImageReference {
  repository: string;
  tag: string | null;
  digest: string | null;
}

const DIGEST = /^sha256:[a-f0-9]{64}$/;

/** Parses `repo[:tag][@sha256:…]`; a port in the registry host is not a tag. */
export function parseImageReference(ref: string): ImageReference {
  let rest = ref;
  let digest: string | null = null;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST.test(digest)) throw new RuntimeError('pull_failed', `image ${ref}: the digest is not sha256:<64 hex>`);
  }
  let tag: string | null = null;
  const colon = rest.lastIndexOf(':');
  if (colon > rest.lastIndexOf('/')) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
  }
  if (rest === '') throw new RuntimeError('pull_failed', `image ${JSON.stringify(ref)} names no repository`);
  return { repository: rest, tag, digest };
}

/**
 * The name a job's image is pulled and run by: `repo@digest` when pinned (by the assignment or
 * in the reference), else `repo:tag` (`latest` when it names none).
 *
 * @example imageRunName('127.0.0.1:5000/a/b:1', 'sha256:…') // '127.0.0.1:5000/a/b@sha256:…'
 */
export function imageRunName(image: string, pinnedDigest: string | null = null): string {
  const ref = parseImageReference(image);
  const digest = pinnedDigest ?? ref.digest;
  return digest ? `${ref.repository}@${digest}` : `${ref.repository}:${ref.tag ?? 'latest'}`;
}

/** What `ensureImage` settled on: the pinned reference the container is created from. */
export interface ResolvedImage {
  /** `repo@sha256:…`: the manifest digest the image was pulled by and is run by. */
  reference: string;
  digest: string;
  /** The local image id (config digest). */
  imageId: string;
  /** The image's `USER` (`''` when it names none). */
  user: string;
  pulled: boolean;
}

/**
 * Makes the image available locally, by digest when pinned:
 * - a digest in the reference that differs from `pinnedDigest` is refused (`digest_mismatch`);
 * - a local image is used only when its RepoDigests hold `repo@digest` (a local tag of the same
 *   name pointing elsewhere is ignored, never run);
 * - otherwise `repo@digest` is pulled, progress reported through `progress` (layers done, bytes
 *   fetched and the rate, at most once a second: `PullProgress`), and its RepoDigests checked
 *   again after the pull;
 * - without a pin, the tag is pulled and its digest read from RepoDigests.
 * `onPull` is called just before a pull begins (never when the image was already there).
 *
 * @throws RuntimeError `digest_mismatch` or `pull_failed` (the registry's message kept as cause).
 */
export async function ensureImage(docker: Docker, image: string, pinnedDigest: string | null, progress: (line: string) => void, onPull?: () => void): Promise<ResolvedImage> {
  const ref = parseImageReference(image);
  if (ref.digest && pinnedDigest && ref.digest !== pinnedDigest) {
    throw new RuntimeError('digest_mismatch', `image ${image} names digest ${ref.digest}, the assignment pins ${pinnedDigest}`);
  }
  const digest = pinnedDigest ?? ref.digest;
  if (digest) {
    const pinned = `${ref.repository}@${digest}`;
    const local = await localImage(docker, pinned);
    if (local && local.RepoDigests?.includes(pinned)) {
      progress(`image ${pinned} present locally`);
      return { reference: pinned, digest, imageId: local.Id, user: local.Config?.User ?? '', pulled: false };
    }
    onPull?.();
    await pull(docker, pinned, progress);
    const after = await localImage(docker, pinned);
    if (!after || !after.RepoDigests?.includes(pinned)) {
      throw new RuntimeError('digest_mismatch', `after pulling ${pinned} no local image carries that digest`);
    }
    return { reference: pinned, digest, imageId: after.Id, user: after.Config?.User ?? '', pulled: true };
  }
  const tagged = `${ref.repository}:${ref.tag ?? 'latest'}`;
  onPull?.();
  await pull(docker, tagged, progress);
  const after = await localImage(docker, tagged);
  const repoDigest = after?.RepoDigests?.find((d) => d.startsWith(`${ref.repository}@`));
  if (!after || !repoDigest) throw new RuntimeError('pull_failed', `pulled ${tagged} but Docker reports no registry digest for it`);
  const found = repoDigest.slice(repoDigest.indexOf('@') + 1);
  return { reference: repoDigest, digest: found, imageId: after.Id, user: after.Config?.User ?? '', pulled: true };
}

async function localImage(docker: Docker, ref: string): Promise<Docker.ImageInspectInfo | null> {
  try {
    return await docker.getImage(ref).inspect();
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 404) return null;
    throw new RuntimeError('pull_failed', `inspecting image ${ref} failed: ${errorText(err)}`, { cause: err });
  }
}

async function pull(docker: Docker, ref: string, progress: (line: string) => void): Promise<void> {
  progress(`pulling ${ref}`);
  const figures = new PullProgress(ref, Date.now());
  let stream: NodeJS.ReadableStream;
  try {
    stream = (await docker.pull(ref)) as NodeJS.ReadableStream;
  } catch (err) {
    throw new RuntimeError('pull_failed', `pull of ${ref} failed: ${errorText(err)}`, { cause: err });
  }
  let streamError: string | null = null;
  await new Promise<void>((resolve, reject) => {
    docker.modem.followProgress(
      stream,
      (err: Error | null) => {
        if (err) reject(new RuntimeError('pull_failed', `pull of ${ref} failed: ${err.message}`, { cause: err }));
        else if (streamError) reject(new RuntimeError('pull_failed', `pull of ${ref} failed: ${streamError}`));
        else resolve();
      },
      (event: PullEvent) => {
        // Errors after the 200 arrive as events in the stream, not as a failed request.
        if (event.error) {
          streamError = event.errorDetail?.message ?? event.error;
          return;
        }
        const line = figures.event(event, Date.now());
        if (line) progress(line);
      },
    );
  });
  progress(figures.summary(Date.now()));
}
