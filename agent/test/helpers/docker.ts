import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import type { Test } from 'tap';
import tar from 'tar-stream';
import type { AssignmentSpec } from '@gpufarm/shared';
import { DockerRuntime, type RuntimeDeps } from '../../src/runtime/docker-runtime.js';
import { LABEL_OWNER } from '../../src/docker/labels.js';
import type { RuntimeLogLine } from '../../src/docker/log-lines.js';
import { releaseOutputMount } from '../../src/runtime/output-mount.js';
import { readdirSync } from 'node:fs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..');

export interface LocalImage {
  repository: string;
  tag: string;
  digest: string;
  reference: string;
}

/** The images scripts/build-images.sh pushed to the local registry (run by `npm test`'s test-env.sh). */
export function localImages(): { registry: string; canary: LocalImage; busybox: LocalImage; egressProxy: LocalImage } {
  const path = join(ROOT, '.gpufarm/images.json');
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    throw new Error(`${path} is missing: run bash scripts/test-env.sh (or bash scripts/build-images.sh)`);
  }
  const parsed = JSON.parse(text) as { registry: string; images: { canary: LocalImage; busybox: LocalImage; 'egress-proxy'?: LocalImage } };
  const { 'egress-proxy': egressProxy, ...images } = parsed.images;
  if (!egressProxy) throw new Error(`${path} has no egress-proxy: run bash scripts/build-images.sh`);
  return { registry: parsed.registry, ...images, egressProxy };
}

export const docker = new Docker();

/** A unique name for this test's containers, tags and folders (tap runs files in parallel). */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

/**
 * A runtime with its own owner label and state folder; teardown removes every container of
 * that owner, unmounts every /output it made and deletes the folder.
 */
export function testRuntime(t: Test, overrides: Partial<RuntimeDeps> = {}): DockerRuntime {
  const owner = overrides.owner ?? uniqueName('t');
  const stateDir = overrides.stateDir ?? mkdtempSync(join(tmpdir(), 'gf-runtime-'));
  const runtime = new DockerRuntime({
    docker,
    machine: { simulated: true, cpuCores: 2, ramBytes: 4 * 1024 ** 3 },
    owner,
    stateDir,
    stopGraceSeconds: 2,
    ...overrides,
  });
  t.teardown(() => cleanOwner(owner, stateDir));
  return runtime;
}

/** Removes an owner's containers, mounts and state folder. */
export async function cleanOwner(owner: string, stateDir: string): Promise<void> {
  const containers = await docker.listContainers({ all: true, filters: { label: [`${LABEL_OWNER}=${owner}`] } });
  for (const c of containers) await docker.getContainer(c.Id).remove({ force: true, v: true }).catch(() => undefined);
  let names: string[] = [];
  try {
    names = readdirSync(join(stateDir, 'assignments'));
  } catch {
    // Nothing was started.
  }
  for (const name of names) await releaseOutputMount(join(stateDir, 'assignments', name)).catch(() => undefined);
  await rm(stateDir, { recursive: true, force: true });
}

/** An assignment for the busybox image, pinned by digest; override what the test needs. */
export function busyboxSpec(overrides: Partial<AssignmentSpec> = {}): AssignmentSpec {
  const img = localImages().busybox;
  const id = uniqueName('asg');
  return {
    assignmentId: id,
    jobId: `job_${id}`,
    image: img.repository,
    imageDigest: img.digest,
    command: ['true'],
    env: {},
    gpus: [],
    cpuCores: 1,
    ramBytes: 64 * 1024 * 1024,
    maxRuntimeSeconds: 60,
    networkPolicy: { mode: 'none' },
    inputs: [],
    outputRules: [{ path: '/output', maxBytes: 1024 * 1024 }],
    ...overrides,
  };
}

/**
 * Pushes a variant of the busybox image to the local registry: `USER user` set, and `files`
 * (path under / to text, to text with a mode, or to a symbolic link's target) put in. Made
 * offline from the pinned busybox image (a created container, its files put in, committed with
 * the USER change); the local copy goes at teardown, the registry keeps the manifest.
 */
export async function busyboxWithUser(t: Test, opts: { user: string; files?: Record<string, string | { linkTo: string } | { text: string; mode: number }> }): Promise<LocalImage> {
  const { registry, busybox } = localImages();
  const repository = `${registry}/gpufarm/busybox-user`;
  const tag = uniqueName('t');
  const base = await docker.createContainer({ Image: busybox.reference, Cmd: ['true'], Labels: { 'org.gpufarm.test': 'image-with-user' } });
  try {
    const pack = tar.pack();
    for (const [path, content] of Object.entries(opts.files ?? {})) {
      if (typeof content === 'string') pack.entry({ name: path.replace(/^\//, ''), mode: 0o644 }, content);
      else if ('text' in content) pack.entry({ name: path.replace(/^\//, ''), mode: content.mode }, content.text);
      else pack.entry({ name: path.replace(/^\//, ''), type: 'symlink', linkname: content.linkTo });
    }
    pack.finalize();
    await base.putArchive(pack as unknown as NodeJS.ReadableStream, { path: '/' });
    await base.commit({ repo: repository, tag, changes: `USER ${opts.user}` });
  } finally {
    await base.remove({ force: true });
  }
  const image = docker.getImage(`${repository}:${tag}`);
  t.teardown(() => image.remove().catch(() => undefined));
  // Docker wants an X-Registry-Auth header even for a registry without authentication.
  const stream = (await image.push({ authconfig: { serveraddress: registry } })) as NodeJS.ReadableStream;
  const events = await new Promise<Array<{ aux?: { Digest?: string }; error?: string }>>((resolve, reject) =>
    docker.modem.followProgress(stream, (err: Error | null, out: Array<{ aux?: { Digest?: string }; error?: string }>) => (err ? reject(err) : resolve(out))),
  );
  const failed = events.find((e) => e.error);
  if (failed) throw new Error(`pushing ${repository}:${tag} failed: ${failed.error}`);
  const digest = events.find((e) => e.aux?.Digest)?.aux?.Digest;
  if (!digest) throw new Error(`pushing ${repository}:${tag} reported no digest`);
  return { repository, tag, digest, reference: `${repository}@${digest}` };
}

/**
 * Pushes busybox with one more layer of `bytes` random bytes to the local registry (a repository
 * of its own), built offline with COPY (no container runs), and removes the local copy so that a
 * job's start has to pull it. Teardown removes any local copy and the registry's manifest.
 */
export async function pushRandomImage(t: Test, bytes: number): Promise<LocalImage> {
  const run = promisify(execFile);
  const { registry, busybox } = localImages();
  const repository = `${registry}/gpufarm/${uniqueName('cachetest')}`;
  const tag = 't';
  const dir = mkdtempSync(join(tmpdir(), 'gf-image-'));
  try {
    writeFileSync(join(dir, 'blob'), randomBytes(bytes));
    writeFileSync(join(dir, 'Dockerfile'), `FROM ${busybox.reference}\nCOPY blob /blob\n`);
    await run('docker', ['build', '-q', '-t', `${repository}:${tag}`, dir], { env: { ...process.env, DOCKER_BUILDKIT: '0' } });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  await run('docker', ['push', `${repository}:${tag}`]);
  const digest = (await run('docker', ['inspect', '--format', '{{index .RepoDigests 0}}', `${repository}:${tag}`])).stdout.trim().split('@')[1]!;
  const reference = `${repository}@${digest}`;
  const removeLocal = async () => {
    await run('docker', ['rmi', `${repository}:${tag}`]).catch(() => undefined);
    await run('docker', ['rmi', reference]).catch(() => undefined);
  };
  await removeLocal();
  t.teardown(async () => {
    await removeLocal();
    await fetch(`http://${registry}/v2/${repository.slice(registry.length + 1)}/manifests/${digest}`, { method: 'DELETE' }).catch(() => undefined);
  });
  return { repository, tag, digest, reference };
}

/** Whether an image of this name (`repo@digest` or `repo:tag`) is on the machine. */
export async function imagePresent(name: string): Promise<boolean> {
  return docker.getImage(name).inspect().then(() => true, (err: { statusCode?: number }) => {
    if (err.statusCode === 404) return false;
    throw err;
  });
}

/** Resolves once `check` holds, asking every 100 ms; rejects after `ms`. */
export async function waitFor(check: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A sink that keeps every line. */
export function collectLines(): { lines: RuntimeLogLine[]; sink: (line: RuntimeLogLine) => void; of: (stream: string) => string[] } {
  const lines: RuntimeLogLine[] = [];
  return { lines, sink: (l) => lines.push(l), of: (stream) => lines.filter((l) => l.stream === stream).map((l) => l.line) };
}

/** What an HTTP sink received for one PUT. */
export interface ReceivedUpload {
  path: string;
  body: Buffer;
  headers: IncomingMessage['headers'];
  trailers: Record<string, string | undefined>;
  complete: boolean;
}

/**
 * A local HTTP server that stores PUT bodies (the control plane's upload endpoint stands in).
 * `failFirst` answers that many requests with 503 before accepting; a body over `maxBytes` is
 * answered 413, as the control plane answers an artifact over its limit. It has no direct
 * uploads: an agent's `POST …/uploads` gets 404, as from a control plane without them.
 */
export async function uploadSink(t: Test, opts: { failFirst?: number; maxBytes?: number } = {}): Promise<{ url: string; received: ReceivedUpload[]; server: Server }> {
  const received: ReceivedUpload[] = [];
  let failures = opts.failFirst ?? 0;
  const server = createServer((req, res) => {
    if (req.method === 'POST') {
      req.resume();
      res.writeHead(404).end();
      return;
    }
    const chunks: Buffer[] = [];
    const entry: ReceivedUpload = { path: req.url ?? '', body: Buffer.alloc(0), headers: req.headers, trailers: {}, complete: false };
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      entry.body = Buffer.concat(chunks);
      entry.trailers = req.trailers;
      entry.complete = true;
      received.push(entry);
      if (failures > 0) {
        failures--;
        res.writeHead(503).end();
        return;
      }
      if (opts.maxBytes !== undefined && entry.body.length > opts.maxBytes) {
        res.writeHead(413).end();
        return;
      }
      res.writeHead(201, { 'content-type': 'application/json' }).end('{}');
    });
    req.on('aborted', () => {
      entry.body = Buffer.concat(chunks);
      received.push(entry);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const address = server.address() as { port: number };
  return { url: `http://127.0.0.1:${address.port}`, received, server };
}
