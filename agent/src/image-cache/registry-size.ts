import { z } from 'zod';
import { parseImageReference } from '../docker/image.js';

/**
 * What a registry says of an image before it is pulled: its layers by uncompressed digest (the
 * config's `rootfs.diff_ids`, which `RootFS.Layers` of the pulled image will list), with the
 * bytes each downloads and, estimated, takes on disk. A small client of the registry API (v2 /
 * OCI distribution): manifests, manifest lists and OCI indexes (the entry of this machine's
 * platform), anonymous bearer tokens (Docker Hub, GHCR), blobs and ranges of blobs.
 */
export interface RegistryImage {
  layers: RegistryLayer[];
}

export interface RegistryLayer {
  /** The uncompressed digest (`rootfs.diff_ids`). */
  diffId: string;
  /** Bytes the registry stores (what a pull downloads). */
  compressedBytes: number;
  /** Bytes uncompressed: from the gzip trailer, else an estimate (`estimated`). */
  bytes: number;
  estimated: boolean;
}

export interface RegistryLookupOptions {
  /** Whether Docker talks plain HTTP to this registry host (`insecureRegistryHosts`). */
  insecure: (host: string) => boolean;
  /** The platform a manifest list is read for (this machine's). */
  platform: { os: string; architecture: string; variant?: string };
  timeoutMs?: number;
}

/**
 * A layer whose uncompressed size cannot be read (not gzip, or the registry would not serve its
 * last bytes) counts this many times its compressed size: gzip of a typical image layer keeps
 * a third to a half of the bytes, and counting more refuses a job sooner rather than filling a disk.
 */
export const UNKNOWN_EXPANSION = 3;

const DOCKER_HUB = 'registry-1.docker.io';
const MANIFEST_V2 = 'application/vnd.docker.distribution.manifest.v2+json';
const MANIFEST_LIST = 'application/vnd.docker.distribution.manifest.list.v2+json';
const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
const OCI_INDEX = 'application/vnd.oci.image.index.v1+json';
const digestSchema = z.string().regex(/^sha256:[a-f0-9]{64}$/);
const manifestSchema = z.object({
  config: z.object({ digest: digestSchema }),
  layers: z.array(z.object({ mediaType: z.string(), size: z.int().min(0), digest: digestSchema })),
});
const indexSchema = z.object({
  manifests: z.array(z.object({ digest: digestSchema, platform: z.object({ os: z.string(), architecture: z.string(), variant: z.string().optional() }).optional() })),
});
const configSchema = z.object({ rootfs: z.object({ diff_ids: z.array(digestSchema) }) });
const tokenSchema = z.union([z.object({ token: z.string().min(1) }), z.object({ access_token: z.string().min(1) })]);

/**
 * Where a repository lives: its registry host and its path there, as Docker resolves a name
 * (`busybox` is Docker Hub's `library/busybox`; a first part with a dot, a port or `localhost` is a host).
 *
 * @example registryLocation('127.0.0.1:5000/gpufarm/busybox') // { host: '127.0.0.1:5000', path: 'gpufarm/busybox' }
 * @example registryLocation('pytorch/pytorch') // { host: 'registry-1.docker.io', path: 'pytorch/pytorch' }
 */
export function registryLocation(repository: string): { host: string; path: string } {
  const slash = repository.indexOf('/');
  const first = slash < 0 ? '' : repository.slice(0, slash);
  if (slash >= 0 && (first.includes('.') || first.includes(':') || first === 'localhost')) {
    const host = first === 'docker.io' || first === 'index.docker.io' ? DOCKER_HUB : first;
    const path = repository.slice(slash + 1);
    return { host, path: host === DOCKER_HUB && !path.includes('/') ? `library/${path}` : path };
  }
  return { host: DOCKER_HUB, path: slash < 0 ? `library/${repository}` : repository };
}

/**
 * The hosts Docker reaches over plain HTTP, from `docker info`: those its `IndexConfigs` marks
 * insecure, and addresses in `InsecureRegistryCIDRs` (127.0.0.0/8 by default).
 */
export function insecureRegistryHosts(info: { RegistryConfig?: { IndexConfigs?: Record<string, { Secure?: boolean }>; InsecureRegistryCIDRs?: string[] } }): (host: string) => boolean {
  const named = new Set(Object.entries(info.RegistryConfig?.IndexConfigs ?? {}).filter(([, c]) => c.Secure === false).map(([name]) => name));
  const cidrs = (info.RegistryConfig?.InsecureRegistryCIDRs ?? []).map(parseCidr).filter((c): c is { base: number; mask: number } => c !== null);
  return (host) => {
    if (named.has(host)) return true;
    const ip = ipv4(host.replace(/:\d+$/, ''));
    return ip !== null && cidrs.some((c) => ((ip & c.mask) >>> 0) === c.base);
  };
}

function ipv4(text: string): number | null {
  const parts = text.split('.');
  if (parts.length !== 4 || parts.some((p) => !/^\d{1,3}$/.test(p) || Number(p) > 255)) return null;
  return parts.reduce((n, p) => ((n << 8) | Number(p)) >>> 0, 0);
}

function parseCidr(cidr: string): { base: number; mask: number } | null {
  const [addr, bits] = cidr.split('/');
  const ip = ipv4(addr ?? '');
  const n = Number(bits);
  if (ip === null || !Number.isInteger(n) || n < 0 || n > 32) return null;
  const mask = n === 0 ? 0 : (0xffffffff << (32 - n)) >>> 0;
  return { base: (ip & mask) >>> 0, mask };
}

/** This machine's platform as a manifest list names it. */
export function hostPlatform(): { os: string; architecture: string; variant?: string } {
  const arch = process.arch === 'x64' ? 'amd64' : process.arch === 'arm64' ? 'arm64' : process.arch;
  return arch === 'arm64' ? { os: 'linux', architecture: arch, variant: 'v8' } : { os: 'linux', architecture: arch };
}

/**
 * Reads an image's layers from its registry without pulling it: the manifest (through a list
 * or index, the entry of this platform), the config's diff ids, and each gzip layer's
 * uncompressed size from its last four bytes (gzip's ISIZE, the size modulo 2^32), fetched
 * with a Range request.
 *
 * @throws Error when the registry cannot be reached, refuses, or answers what is not an image
 */
export async function registryImage(reference: string, opts: RegistryLookupOptions): Promise<RegistryImage> {
  const ref = parseImageReference(reference);
  const { host, path } = registryLocation(ref.repository);
  const registry = new RegistryClient(`${opts.insecure(host) ? 'http' : 'https'}://${host}/v2/${path}`, opts.timeoutMs ?? 15_000);
  let manifest = await registry.json(`manifests/${ref.digest ?? ref.tag ?? 'latest'}`, [MANIFEST_V2, MANIFEST_LIST, OCI_MANIFEST, OCI_INDEX].join(', '));
  if (Array.isArray((manifest as { manifests?: unknown }).manifests)) {
    const entry = platformEntry(indexSchema.parse(manifest).manifests, opts.platform);
    if (!entry) throw new Error(`${reference} has no image for ${opts.platform.os}/${opts.platform.architecture}`);
    manifest = await registry.json(`manifests/${entry.digest}`, [MANIFEST_V2, OCI_MANIFEST].join(', '));
  }
  const image = manifestSchema.parse(manifest);
  const diffIds = configSchema.parse(await registry.json(`blobs/${image.config.digest}`, '*/*')).rootfs.diff_ids;
  if (diffIds.length !== image.layers.length) throw new Error(`the manifest of ${reference} lists ${image.layers.length} layers, its config ${diffIds.length}`);
  const layers = await Promise.all(
    image.layers.map(async (layer, i): Promise<RegistryLayer> => {
      const diffId = diffIds[i]!;
      if (/tar$/.test(layer.mediaType)) return { diffId, compressedBytes: layer.size, bytes: layer.size, estimated: false };
      const isize = /gzip$/.test(layer.mediaType) ? await registry.gzipTrailer(layer.digest, layer.size) : null;
      if (isize === null) return { diffId, compressedBytes: layer.size, bytes: layer.size * UNKNOWN_EXPANSION, estimated: true };
      // ISIZE is the size modulo 2^32: the smallest value not far below the compressed size.
      let bytes = isize;
      while (bytes < layer.size * 0.9) bytes += 2 ** 32;
      return { diffId, compressedBytes: layer.size, bytes, estimated: false };
    }),
  );
  return { layers };
}

/** The list's entry for `platform` (attestations, `unknown/unknown`, left out; a lone entry is taken as it is). */
function platformEntry(entries: z.infer<typeof indexSchema>['manifests'], platform: RegistryLookupOptions['platform']): z.infer<typeof indexSchema>['manifests'][number] | null {
  const images = entries.filter((e) => e.platform?.os !== 'unknown');
  if (images.length === 1) return images[0]!;
  const same = images.filter((e) => e.platform?.os === platform.os && e.platform.architecture === platform.architecture);
  return same.find((e) => platform.variant === undefined || e.platform?.variant === undefined || e.platform.variant === platform.variant) ?? null;
}

/**
 * One repository of a registry: GETs under `base` (`…/v2/<path>`), answering a 401's bearer
 * challenge with an anonymous token once (the agent pulls with no credentials, as Docker does
 * for it). Redirects to blob storage are followed; the token does not go to another origin.
 */
class RegistryClient {
  private token: string | null = null;

  constructor(private readonly base: string, private readonly timeoutMs: number) {}

  async json(suffix: string, accept: string): Promise<unknown> {
    const res = await this.get(suffix, { accept });
    if (!res.ok) {
      await res.body?.cancel();
      throw new Error(`${this.base}/${suffix} answered HTTP ${res.status}`);
    }
    return res.json();
  }

  /** A gzip member's ISIZE (its last four bytes, little-endian), or null when the registry will not serve the range. */
  async gzipTrailer(digest: string, size: number): Promise<number | null> {
    if (size < 18) return null;
    try {
      const res = await this.get(`blobs/${digest}`, { accept: '*/*', range: `bytes=${size - 4}-${size - 1}` });
      // A registry that ignored the range would send the whole layer: not read.
      if (res.status !== 206) {
        await res.body?.cancel();
        return null;
      }
      const body = Buffer.from(await res.arrayBuffer());
      return body.length === 4 ? body.readUInt32LE(0) : null;
    } catch {
      return null;
    }
  }

  private async get(suffix: string, headers: Record<string, string>): Promise<Response> {
    const url = `${this.base}/${suffix}`;
    const send = () => fetch(url, { headers: { ...headers, ...(this.token ? { authorization: `Bearer ${this.token}` } : {}) }, redirect: 'follow', signal: AbortSignal.timeout(this.timeoutMs) });
    const res = await send();
    if (res.status !== 401 || this.token !== null) return res;
    await res.body?.cancel();
    this.token = await this.bearerToken(res.headers.get('www-authenticate') ?? '', url);
    return send();
  }

  /** An anonymous token for a `Bearer realm="…",service="…",scope="…"` challenge. */
  private async bearerToken(challenge: string, url: string): Promise<string> {
    if (!/^bearer\s/i.test(challenge)) throw new Error(`${url} wants credentials (${challenge.split(' ')[0] || 'no challenge'}), which the agent does not have`);
    const params = Object.fromEntries([...challenge.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!.toLowerCase(), m[2]!]));
    if (!params.realm) throw new Error(`${url} sent a bearer challenge without a realm`);
    const realm = new URL(params.realm);
    if (params.service) realm.searchParams.set('service', params.service);
    if (params.scope) realm.searchParams.set('scope', params.scope);
    const res = await fetch(realm, { signal: AbortSignal.timeout(this.timeoutMs) });
    if (!res.ok) throw new Error(`the token service ${realm.origin} answered HTTP ${res.status}`);
    const body = tokenSchema.parse(await res.json());
    return 'token' in body ? body.token : body.access_token;
  }
}
