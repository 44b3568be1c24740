import { createHash } from 'node:crypto';
import { existsSync, lstatSync, readdirSync, readFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type Docker from 'dockerode';
import tar from 'tar-stream';
import { errorText } from '@gpufarm/shared';

/**
 * The benchmark image, made on this machine from the gpu-bench program the agent's package
 * carries (`dist/gpu-bench/`: the binary and the glibc pieces it loads, laid out by
 * scripts/build-gpu-bench.sh), so a farm needs no registry. One layer with no base, as a
 * Dockerfile `FROM scratch` would make it; the NVIDIA Container Toolkit adds the driver's
 * libcuda.so.1 when a container starts with GPUs. scripts/build-images.sh makes the test image
 * with this same code.
 */

/** The repository of the image made here; the tag is the program's digest. */
export const GPU_BENCH_REPOSITORY = 'gpufarm/gpu-bench';

/**
 * The image's configuration (`docker import --change` lines). LD_LIBRARY_PATH names where the
 * toolkit mounts the driver's libraries, as a container with no ld.so.cache needs for the
 * libraries libcuda itself loads (the PTX JIT compiler).
 */
export const GPU_BENCH_IMAGE_CHANGES = [
  'ENTRYPOINT ["/gpu-bench"]',
  'ENV LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu:/usr/lib64:/usr/local/nvidia/lib64:/usr/lib/aarch64-linux-gnu',
  'LABEL org.gpufarm.image=gpu-bench',
];

interface ProgramFile {
  /** Relative to the image's root, no leading slash. */
  path: string;
  mode: number;
  bytes: Buffer;
}

/** The program as found on disk, with the digest that names its image. */
export interface GpuBenchProgram {
  dir: string;
  files: ProgramFile[];
  /** sha256 over every file's path, mode and bytes. */
  digest: string;
}

/** The ELF `e_machine` of each CPU the agent runs on. */
const ELF_MACHINE: Partial<Record<NodeJS.Architecture, number>> = { x64: 62, arm64: 183 };

/**
 * Where the program is: beside the bundled command in an installed package (`dist/gpu-bench/`),
 * or in a source checkout where scripts/build-images.sh laid it out (`.gpufarm/gpu-bench/rootfs`).
 * @throws Error naming the folders it looked in
 */
export function findGpuBenchDir(): string {
  const candidates = [new URL('./gpu-bench/', import.meta.url), new URL('../../../.gpufarm/gpu-bench/rootfs/', import.meta.url)].map((u) => fileURLToPath(u));
  const found = candidates.find((dir) => existsSync(join(dir, 'gpu-bench')));
  if (found === undefined) {
    throw new Error(`the gpu-bench program is not in this agent (looked in ${candidates.join(' and ')}): reinstall the agent package; in a source checkout, run scripts/build-images.sh`);
  }
  return found;
}

/**
 * Reads the program's files. Refuses a folder without `gpu-bench`, with links or other
 * non-files in it, or a binary for another CPU than this one.
 */
export function readGpuBenchProgram(dir: string): GpuBenchProgram {
  const files: ProgramFile[] = [];
  const walk = (rel: string) => {
    for (const name of readdirSync(join(dir, rel)).sort()) {
      const path = rel === '' ? name : `${rel}/${name}`;
      const stat = lstatSync(join(dir, path));
      if (stat.isDirectory()) walk(path);
      else if (stat.isFile()) files.push({ path, mode: stat.mode & 0o7777, bytes: readFileSync(join(dir, path)) });
      else throw new Error(`${join(dir, path)}: the gpu-bench folder holds files and folders only`);
    }
  };
  walk('');
  const binary = files.find((f) => f.path === 'gpu-bench');
  if (!binary) throw new Error(`${dir} has no gpu-bench binary`);
  const machine = binary.bytes.length > 20 && binary.bytes.readUInt32BE(0) === 0x7f454c46 ? binary.bytes.readUInt16LE(18) : null;
  if (machine === null) throw new Error(`${join(dir, 'gpu-bench')} is not an ELF binary`);
  if (machine !== ELF_MACHINE[process.arch]) throw new Error(`${join(dir, 'gpu-bench')} is built for another CPU (ELF machine ${machine}) than this ${process.arch} machine`);
  const hash = createHash('sha256');
  for (const f of files) hash.update(`${f.path}\0${f.mode.toString(8)}\0${f.bytes.length}\0`).update(f.bytes);
  return { dir, files, digest: hash.digest('hex') };
}

/** `repository:<first 12 hex of the digest>`: another program, another image. */
export function gpuBenchImageName(repository: string, program: GpuBenchProgram): string {
  return `${repository}:${program.digest.slice(0, 12)}`;
}

/**
 * Whether a `benchmark_image` setting names an image as it is (a tag or a digest), rather than
 * the repository of the image this agent makes (`gpufarm/gpu-bench`, a registry host:port allowed).
 */
export function namesTaggedImage(reference: string): boolean {
  return reference.includes('@') || reference.slice(reference.lastIndexOf('/') + 1).includes(':');
}

/** The root file system as a tar stream: the program's files, their folders, and /tmp. */
function rootfsTar(program: GpuBenchProgram): NodeJS.ReadableStream {
  const pack = tar.pack();
  const dirs = new Set<string>(['tmp']);
  for (const f of program.files) {
    for (let d = posix.dirname(f.path); d !== '.'; d = posix.dirname(d)) dirs.add(d);
  }
  const header = { uid: 0, gid: 0, uname: 'root', gname: 'root', mtime: new Date(0) };
  for (const d of [...dirs].sort()) pack.entry({ ...header, name: `${d}/`, type: 'directory', mode: d === 'tmp' ? 0o1777 : 0o755 });
  for (const f of program.files) pack.entry({ ...header, name: f.path, mode: f.mode }, f.bytes);
  pack.finalize();
  // tar-stream's stream is streamx's; Docker's client takes Node's.
  return Readable.from(pack);
}

/**
 * The image of `program` in `repository`: made with `docker import` when this Docker Engine
 * does not have it yet, left as it is when it does. `created` says which.
 */
export async function ensureGpuBenchImage(docker: Docker, options: { repository: string; program: GpuBenchProgram }): Promise<{ image: string; created: boolean }> {
  const image = gpuBenchImageName(options.repository, options.program);
  if (await docker.getImage(image).inspect().then(() => true, () => false)) return { image, created: false };
  const tag = image.slice(image.lastIndexOf(':') + 1);
  const stream = (await docker.importImage(rootfsTar(options.program), { repo: options.repository, tag, changes: GPU_BENCH_IMAGE_CHANGES })) as NodeJS.ReadableStream;
  // Errors after the 200 arrive as events in the stream.
  await new Promise<void>((resolve, reject) => {
    let streamError: string | null = null;
    docker.modem.followProgress(
      stream,
      (err: Error | null) => (err ? reject(err) : streamError ? reject(new Error(streamError)) : resolve()),
      (event: { error?: string; errorDetail?: { message?: string } }) => {
        if (event.error) streamError = event.errorDetail?.message ?? event.error;
      },
    );
  }).catch((err: unknown) => {
    throw new Error(`making the benchmark image ${image} failed: ${errorText(err)}`);
  });
  await docker.getImage(image).inspect().catch(() => {
    throw new Error(`Docker imported the benchmark image but has no ${image}`);
  });
  return { image, created: true };
}

/**
 * Makes the agent's benchmark image when `setting` (`benchmark_image`) names a repository, and
 * says in one line what it did; an operator's tagged image is left alone.
 * @throws Error when the program is missing or Docker refuses the image
 */
export async function prepareBenchmarkImage(docker: Docker, setting: string, programDir?: string): Promise<string> {
  if (namesTaggedImage(setting)) return `benchmark image ${setting} (benchmark_image): not made here`;
  const program = readGpuBenchProgram(programDir ?? findGpuBenchDir());
  const { image, created } = await ensureGpuBenchImage(docker, { repository: setting, program });
  return created ? `benchmark image ${image}: made from ${program.dir}` : `benchmark image ${image}: already on this machine`;
}
