import { parseImageReference } from './schemas/job-create.js';

/**
 * Image repository names as the workload policy compares them, and the configured ban patterns
 * (`GF_BANNED_IMAGES`) parsed here so configuration can refuse a bad one before anything starts.
 */

const DOCKER_HUB_HOSTS: ReadonlySet<string> = new Set(['docker.io', 'index.docker.io', 'registry-1.docker.io', 'registry.hub.docker.com']);

/** A repository reduced for matching: `registry` is null for Docker Hub. */
export interface Repository {
  registry: string | null;
  path: string;
}

/** A compiled ban pattern; `registry` undefined means any registry, null Docker Hub. */
export interface BannedImagePattern {
  registry: string | null | undefined;
  path: string;
  prefix: boolean;
  source: string;
}

/**
 * Splits a repository name into its registry host (null for Docker Hub and its aliases) and its
 * path, lower case, without a leading `library/` (Docker Hub's official namespace, which its
 * mirrors keep): `docker.io/library/hashcat` gives
 * `{ registry: null, path: 'hashcat' }`. The host is the first segment when it has a `.` or a
 * `:` or is `localhost`, as in distribution/reference.
 */
export function splitRegistry(name: string): Repository {
  const lower = name.toLowerCase();
  const slash = lower.indexOf('/');
  const first = slash < 0 ? '' : lower.slice(0, slash);
  const hasHost = slash >= 0 && (first.includes('.') || first.includes(':') || first === 'localhost');
  let registry = hasHost ? first : null;
  let path = hasHost ? lower.slice(slash + 1) : lower;
  if (registry !== null && DOCKER_HUB_HOSTS.has(registry)) registry = null;
  if (path.startsWith('library/') && path.indexOf('/', 'library/'.length) < 0) path = path.slice('library/'.length);
  return { registry, path };
}

/**
 * Compiles one configured ban pattern, or returns null when it is not one: a repository name
 * (optionally with a registry host) without tag or digest, optionally ending in a single `*`
 * after a non-empty prefix. Upper case is accepted and folded.
 *
 * @example parseBannedImagePattern('acme/*') // { path: 'acme/', prefix: true, … }
 * @example parseBannedImagePattern('acme/tool:1.0') // null (tags are not patterns)
 */
export function parseBannedImagePattern(entry: string): BannedImagePattern | null {
  const text = entry.trim().toLowerCase();
  const prefix = text.endsWith('*');
  const body = prefix ? text.slice(0, -1) : text;
  if (body === '' || body.includes('*') || body.includes('@')) return null;
  if (prefix) {
    if (!/^[a-z0-9][a-z0-9._/:-]*$/.test(body)) return null;
  } else {
    const ref = parseImageReference(body);
    if (ref === null || ref.tag !== null || ref.digest !== null) return null;
  }
  // "ghcr.io/*" is a whole registry: split on the text before the star.
  const repository = splitRegistry(body);
  const explicitHost = repository.registry !== null || [...DOCKER_HUB_HOSTS].some((host) => body.startsWith(`${host}/`));
  // `library/*` would reduce to "every repository"; refuse it rather than ban everything.
  if (repository.path === '' && !explicitHost) return null;
  return { registry: explicitHost ? repository.registry : undefined, path: repository.path, prefix, source: entry };
}

/**
 * The name image-aware matching compares (an image a job asks for against the ones agents hold):
 * the repository as `splitRegistry` reduces it (so `docker.io/library/ubuntu` and `ubuntu` are
 * one), then `@sha256:…` when `digest` (or the reference) pins one, else `:tag` (`latest` when
 * none). Null when `ref` is no image reference. Docker lists `repo@sha256:…` and `repo:tag`;
 * both reduce the same way.
 *
 * @example imageCacheKey('docker.io/library/ubuntu') // 'ubuntu:latest'
 * @example imageCacheKey('ghcr.io/acme/app:1', 'sha256:ab…') // 'ghcr.io/acme/app@sha256:ab…'
 */
export function imageCacheKey(ref: string, digest: string | null = null): string | null {
  const parsed = parseImageReference(ref);
  if (parsed === null) return null;
  const { registry, path } = splitRegistry(parsed.name);
  const repository = registry === null ? path : `${registry}/${path}`;
  const pinned = digest ?? parsed.digest;
  return pinned !== null ? `${repository}@${pinned}` : `${repository}:${parsed.tag ?? 'latest'}`;
}
