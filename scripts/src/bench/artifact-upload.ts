import { execFile, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, createReadStream, openSync, readSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { availableParallelism } from 'node:os';
import { z } from 'zod';
import { alignedChunk, CHUNK_BYTES, inThreadSources, OffThreadPacker, uploadArtifact } from '@gpufarm/agent/artifacts';
import { processCpuSeconds } from './cpu.js';
import { median } from './report.js';
import type { StandaloneSection } from './standalone.js';

/** Bytes of the artifact and how many times each side is measured. */
const ARTIFACT_BYTES = Number(process.env.BENCH_ARTIFACT_MIB ?? 256) * 1024 * 1024;
const ARTIFACT_RUNS = 5;
/**
 * Where the upload is packed and sent: `worker` (default), the daemon's way: read, tar, hash and
 * PUT all on its packer worker; `split`: packed and hashed on the worker, sent by the calling
 * thread (the daemon's way before); `thread`: all on the calling thread.
 */
const PACKER = z.enum(['worker', 'split', 'thread']).parse(process.env.BENCH_ARTIFACT_PACKER ?? 'worker');
/** The agent's CPU per GiB uploaded, at most this many times that of reading and hashing the file. */
const CPU_TARGET = 1.35;

const run = promisify(execFile);

const SINK_SCRIPT = `
  const server = require('node:http').createServer((req, res) => {
    req.on('data', () => {});
    req.on('end', () => res.writeHead(201).end());
  });
  server.listen(0, '127.0.0.1', () => console.log(server.address().port));
`;

const figuresSchema = z.object({
  artifactMiB: z.number(),
  /**
   * MiB/s of each run: reading and hashing the file as the agent reads (1 MiB into aligned
   * memory, hashed in the same pass, one thread), the target's baseline; the same with
   * `createReadStream`; and the agent's tar+hash+PUT of it.
   */
  readHash: z.array(z.number()),
  readHashStream: z.array(z.number()),
  upload: z.array(z.number()),
  /**
   * CPU seconds per GiB of each run: read+hash, the agent's upload (the measuring process, all
   * its threads), the sink during it, and a bare loop reading, hashing and writing the file to
   * the sink (`bareUpload`: what sending costs with no packer, streams or tar).
   */
  cpu: z.object({ readHash: z.array(z.number()), agent: z.array(z.number()), sink: z.array(z.number()), bare: z.array(z.number()) }),
});
export type ArtifactUploadFigures = z.infer<typeof figuresSchema>;

/**
 * Measures the artifact upload of the "agent runtime" section in a process of its own, so both
 * sides start from the same small heap: in the bench's process, whose heap the earlier sections
 * grew, each garbage collection costs more, and reading with fresh 1 MiB buffers collects often
 * (the read+hash baseline ran at half speed there).
 */
export async function measureArtifactUpload(): Promise<ArtifactUploadFigures> {
  const { stdout } = await run(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url)]);
  return figuresSchema.parse(JSON.parse(stdout));
}

/**
 * The agent's upload of a 256 MiB output (tar packed, hashed and PUT to a sink process in one
 * pass on the daemon's packer worker) against reading and hashing the same file with 1 MiB
 * reads, two ways (the agent's reads, and `createReadStream`), alternating, after one warm-up
 * upload (the daemon's packer worker starts once). BENCH_ARTIFACT_PACKER (`PACKER`) picks
 * another way to pack and send.
 */
async function measure(): Promise<ArtifactUploadFigures> {
  const outDir = await mkdtemp(join(tmpdir(), 'gf-bench-out-'));
  const chunk = randomBytes(CHUNK_BYTES);
  await writeFile(join(outDir, 'data.bin'), Buffer.concat(Array.from({ length: ARTIFACT_BYTES / CHUNK_BYTES }, () => chunk)));
  // The sink is another process, as the control plane would be.
  const sink = spawn(process.execPath, ['-e', SINK_SCRIPT], { stdio: ['ignore', 'pipe', 'inherit'] });
  const packer = new OffThreadPacker();
  const figures: ArtifactUploadFigures = { artifactMiB: ARTIFACT_BYTES / 1024 / 1024, readHash: [], readHashStream: [], upload: [], cpu: { readHash: [], agent: [], sink: [], bare: [] } };
  const gib = ARTIFACT_BYTES / 1024 ** 3;
  const mibPerSecond = (since: number) => figures.artifactMiB / ((performance.now() - since) / 1000);
  const cpuPerGib = (since: NodeJS.CpuUsage) => {
    const used = process.cpuUsage(since);
    return (used.user + used.system) / 1e6 / gib;
  };
  try {
    const port = await new Promise<number>((resolve, reject) => {
      sink.stdout.once('data', (d: Buffer) => resolve(Number(d.toString().trim())));
      sink.once('exit', (code) => reject(new Error(`the sink exited with ${code}`)));
    });
    const url = `http://127.0.0.1:${port}/agent/v1/assignments/a/outputs/output-0`;
    const rule = { path: '/output', maxBytes: ARTIFACT_BYTES * 2 };
    const uploadOnce = () =>
      PACKER === 'worker'
        ? packer.upload({ kind: 'rule', outputDir: outDir, rule }, { url })
        : uploadArtifact({ url, open: () => (PACKER === 'split' ? packer : inThreadSources).rule(outDir, rule) });
    await uploadOnce();
    const file = join(outDir, 'data.bin');
    for (let i = 0; i < ARTIFACT_RUNS; i++) {
      let cpu0 = process.cpuUsage();
      let t0 = performance.now();
      readAndHash(file);
      figures.readHash.push(mibPerSecond(t0));
      figures.cpu.readHash.push(cpuPerGib(cpu0));

      t0 = performance.now();
      await readAndHashStream(file);
      figures.readHashStream.push(mibPerSecond(t0));

      cpu0 = process.cpuUsage();
      const sink0 = processCpuSeconds(sink.pid!);
      t0 = performance.now();
      const done = await uploadOnce();
      figures.upload.push(mibPerSecond(t0));
      figures.cpu.agent.push(cpuPerGib(cpu0));
      figures.cpu.sink.push((processCpuSeconds(sink.pid!) - sink0) / gib);
      if (done.sizeBytes < ARTIFACT_BYTES) throw new Error(`only ${done.sizeBytes} bytes were sent`);

      cpu0 = process.cpuUsage();
      await bareUpload(file, url);
      figures.cpu.bare.push(cpuPerGib(cpu0));
    }
    return figures;
  } finally {
    sink.kill();
    await packer.close();
    await rm(outDir, { recursive: true, force: true });
  }
}

/** Reads a file with 1 MiB reads into aligned memory, as the agent's packer does, hashing each read. */
function readAndHash(path: string): void {
  const chunk = alignedChunk();
  const hash = createHash('sha256');
  const fd = openSync(path, 'r');
  try {
    for (;;) {
      const bytesRead = readSync(fd, chunk, 0, CHUNK_BYTES, null);
      if (bytesRead === 0) break;
      hash.update(bytesRead === CHUNK_BYTES ? chunk : chunk.subarray(0, bytesRead));
    }
    hash.digest('hex');
  } finally {
    closeSync(fd);
  }
}

/**
 * Reads `path` in 256 KiB reads into four buffers used in turn, hashes each read and writes it
 * to a chunked PUT, waiting only for the write of the buffer about to be read into again.
 */
async function bareUpload(path: string, url: string): Promise<void> {
  const bytes = 256 * 1024;
  const buffers = Array.from({ length: 4 }, () => Buffer.allocUnsafeSlow(bytes + 64).subarray(64));
  const written: (Promise<void> | null)[] = buffers.map(() => null);
  const hash = createHash('sha256');
  const fd = openSync(path, 'r');
  const req = httpRequest(url, { method: 'PUT', headers: { 'transfer-encoding': 'chunked' } });
  const answered = new Promise<void>((resolve, reject) => {
    req.once('error', reject);
    req.once('response', (res) => res.resume().once('end', resolve));
  });
  try {
    for (let i = 0; ; i = (i + 1) % buffers.length) {
      await written[i];
      const n = readSync(fd, buffers[i]!, 0, bytes, null);
      if (n === 0) break;
      const chunk = buffers[i]!.subarray(0, n);
      hash.update(chunk);
      written[i] = new Promise((resolve) => req.write(chunk, () => resolve()));
    }
  } finally {
    closeSync(fd);
  }
  hash.digest('hex');
  req.end();
  await answered;
}

/** The same with `createReadStream`: fresh memory for each read, read on the thread pool. */
async function readAndHashStream(path: string): Promise<void> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path, { highWaterMark: CHUNK_BYTES })) hash.update(chunk as Buffer);
  hash.digest('hex');
}

const row = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(58) : c.padStart(12))).join('  ');

/**
 * The agent's artifact upload (artifact-upload.ts, in a process of its own):
 * - CPU seconds per GiB the agent's process spends on the upload (all its threads; the sink, a
 *   process standing in for the control plane, is not counted) against reading and hashing the
 *   same file on one thread; target: at most CPU_TARGET times as much;
 * - its throughput against read+hash's, as a figure: on a 2-core machine the sink competes
 *   with the agent for the cores, which no farm machine has to share.
 * The CPU line prints the sink's CPU and a `createReadStream` read+hash beside them.
 */
export const artifactUploadSection: StandaloneSection = {
  name: 'artifact upload',
  run: async (log) => {
    const artifact = await measureArtifactUpload();
    const perGib = (xs: number[]) => median(xs).toFixed(2);
    log(
      `${artifact.readHash.length} runs each of ${artifact.artifactMiB} MiB, packed and sent the ${PACKER} way; CPU-s per GiB (medians, ${availableParallelism()} cores): ` +
        `read+hash ${perGib(artifact.cpu.readHash)} in ${(1024 / median(artifact.readHash)).toFixed(2)} s; ` +
        `upload: agent ${perGib(artifact.cpu.agent)} (runs ${artifact.cpu.agent.map((x) => x.toFixed(2)).join(', ')}) + sink ${perGib(artifact.cpu.sink)} in ${(1024 / median(artifact.upload)).toFixed(2)} s; ` +
        `a bare read+hash+write loop to the sink ${perGib(artifact.cpu.bare)} (x${(median(artifact.cpu.bare) / median(artifact.cpu.readHash)).toFixed(2)} of read+hash); ` +
        `read+hash through createReadStream ${median(artifact.readHashStream).toFixed(0)} MiB/s (upload x${(median(artifact.upload) / median(artifact.readHashStream)).toFixed(2)} of it)`,
    );
    const cpuRatio = median(artifact.cpu.agent) / median(artifact.cpu.readHash);
    const cpuOk = cpuRatio <= CPU_TARGET;
    const speedRatio = median(artifact.upload) / median(artifact.readHash);
    const table = [
      row(['measure', 'median', 'baseline', 'difference', 'target', 'result']),
      row([`artifact upload, agent CPU-s per GiB (baseline: read+hash)`, perGib(artifact.cpu.agent), perGib(artifact.cpu.readHash), `x${cpuRatio.toFixed(2)}`, `<= x${CPU_TARGET.toFixed(2)}`, cpuOk ? 'PASS' : 'FAIL']),
      row([`artifact tar+hash+PUT, MiB/s (baseline: read+hash)`, median(artifact.upload).toFixed(0), median(artifact.readHash).toFixed(0), `x${speedRatio.toFixed(2)}`, 'figure', '']),
    ];
    return { table, missed: cpuOk ? [] : [`artifact upload ${cpuRatio.toFixed(2)}x the CPU of read+hash (target <= ${CPU_TARGET})`] };
  },
};

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.stdout.write(JSON.stringify(await measure()));
}
