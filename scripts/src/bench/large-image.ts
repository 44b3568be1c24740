import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { LocalImages } from '../local-agent.js';

const run = promisify(execFile);

/** Layers of random bytes (incompressible, as model weights are): 4 × 256 MiB. */
const LAYERS = 4;
const LAYER_BYTES = 256 * 1024 * 1024;
const MANIFEST_V2 = 'application/vnd.docker.distribution.manifest.v2+json';

export interface LargeImage {
  /** `repo@sha256:…`, as a pinned job names it. */
  reference: string;
  /** Bytes of its layers as the registry stores them (compressed). */
  registryBytes: number;
}

/** The manifest the local registry holds for `repository:tag`, or null. */
async function registryManifest(registry: string, path: string, tag: string): Promise<{ digest: string; bytes: number } | null> {
  const res = await fetch(`http://${registry}/v2/${path}/manifests/${tag}`, { headers: { accept: MANIFEST_V2 } });
  if (res.status === 404) return null;
  if (!res.ok) throw new Error(`the registry at ${registry} answered ${res.status} for ${path}:${tag}`);
  const digest = res.headers.get('docker-content-digest');
  const manifest = (await res.json()) as { layers?: Array<{ size: number }> };
  if (!digest || !manifest.layers) throw new Error(`the registry's manifest of ${path}:${tag} has no digest or layers`);
  return { digest, bytes: manifest.layers.reduce((sum, l) => sum + l.size, 0) };
}

/**
 * A ~1 GiB image of random layers on busybox in the local registry (`gpufarm/bench-large:1g`),
 * built once: a later run finds it there. A large image is what makes a job's start slow, and
 * random bytes are what a registry cannot shrink. No local copy is kept (a cold start pulls it).
 */
export async function ensureLargeImage(images: LocalImages, log: (line: string) => void): Promise<LargeImage> {
  const registry = images.registry;
  const path = 'gpufarm/bench-large';
  const tag = '1g';
  let found = await registryManifest(registry, path, tag);
  if (!found) {
    const dir = mkdtempSync(join(tmpdir(), 'gf-bench-large-'));
    const ref = `${registry}/${path}:${tag}`;
    try {
      log(`building ${ref}: ${LAYERS} layers of ${LAYER_BYTES / 2 ** 20} MiB of random bytes (once; the registry keeps it)`);
      const lines = [`FROM ${images.images.busybox.reference}`];
      for (let i = 0; i < LAYERS; i++) {
        // 16 MiB at a time: one buffer of 256 MiB would double the bench's memory for nothing.
        const file = join(dir, `layer-${i}.bin`);
        writeFileSync(file, '');
        for (let done = 0; done < LAYER_BYTES; done += 16 * 2 ** 20) writeFileSync(file, randomBytes(16 * 2 ** 20), { flag: 'a' });
        lines.push(`COPY layer-${i}.bin /data/layer-${i}.bin`);
      }
      writeFileSync(join(dir, 'Dockerfile'), lines.join('\n') + '\n');
      await run('docker', ['build', '-q', '-t', ref, dir], { env: { ...process.env, DOCKER_BUILDKIT: '0' }, maxBuffer: 16 * 2 ** 20 });
      log(`pushing ${ref} to the local registry`);
      await run('docker', ['push', ref], { maxBuffer: 16 * 2 ** 20 });
      await run('docker', ['rmi', ref]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    found = await registryManifest(registry, path, tag);
    if (!found) throw new Error(`pushed ${ref} but the registry does not list it`);
  }
  return { reference: `${registry}/${path}@${found.digest}`, registryBytes: found.bytes };
}

/** Removes every local copy of the image (by its digest and its tag), so the next start pulls it. */
export async function forgetLocalImage(reference: string): Promise<void> {
  const { stdout } = await run('docker', ['image', 'ls', '--digests', '--format', '{{.ID}} {{.Digest}}', reference.slice(0, reference.indexOf('@'))]);
  const digest = reference.slice(reference.indexOf('@') + 1);
  const ids = [...new Set(stdout.split('\n').filter((l) => l.endsWith(` ${digest}`)).map((l) => l.split(' ')[0]!))];
  if (ids.length > 0) await run('docker', ['rmi', '-f', ...ids]);
}
