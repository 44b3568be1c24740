import { execFile, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, createReadStream, openSync, readSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { z } from 'zod';
import { inThreadSources, OffThreadPacker } from '@gpufarm/agent/artifacts/off-thread.js';
import { alignedChunk, CHUNK_BYTES } from '@gpufarm/agent/artifacts/pack.js';
import { uploadArtifact } from '@gpufarm/agent/artifacts/upload.js';
import { processCpuSeconds } from './cpu.js';

/** Bytes of the artifact and how many times each side is measured. */
const ARTIFACT_BYTES = Number(process.env.BENCH_ARTIFACT_MIB ?? 256) * 1024 * 1024;
const ARTIFACT_RUNS = 5;
/** `thread` measures the upload packed on the sending thread, as before the daemon's packer worker. */
const PACK_ON_THREAD = process.env.BENCH_ARTIFACT_PACKER === 'thread';

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
  /** CPU seconds per GiB of each run: the measuring process (all its threads), and the sink. */
  cpu: z.object({ readHash: z.array(z.number()), agent: z.array(z.number()), sink: z.array(z.number()) }),
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
 * The agent's upload of a 256 MiB output (tar packed and hashed in one pass on the daemon's
 * packer worker, PUT to a sink process) against reading and hashing the same file with 1 MiB
 * reads, two ways (the agent's reads, and `createReadStream`), alternating, after one warm-up
 * upload (the daemon's packer worker starts once). With BENCH_ARTIFACT_PACKER=thread the upload
 * packs on its own thread instead.
 */
async function measure(): Promise<ArtifactUploadFigures> {
  const outDir = await mkdtemp(join(tmpdir(), 'gf-bench-out-'));
  const chunk = randomBytes(CHUNK_BYTES);
  await writeFile(join(outDir, 'data.bin'), Buffer.concat(Array.from({ length: ARTIFACT_BYTES / CHUNK_BYTES }, () => chunk)));
  // The sink is another process, as the control plane would be.
  const sink = spawn(process.execPath, ['-e', SINK_SCRIPT], { stdio: ['ignore', 'pipe', 'inherit'] });
  const packer = new OffThreadPacker();
  const figures: ArtifactUploadFigures = { artifactMiB: ARTIFACT_BYTES / 1024 / 1024, readHash: [], readHashStream: [], upload: [], cpu: { readHash: [], agent: [], sink: [] } };
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
    const sources = PACK_ON_THREAD ? inThreadSources : packer;
    const uploadOnce = () => uploadArtifact({ url, open: () => sources.rule(outDir, { path: '/output', maxBytes: ARTIFACT_BYTES * 2 }) });
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

/** The same with `createReadStream`: fresh memory for each read, read on the thread pool. */
async function readAndHashStream(path: string): Promise<void> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path, { highWaterMark: CHUNK_BYTES })) hash.update(chunk as Buffer);
  hash.digest('hex');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.stdout.write(JSON.stringify(await measure()));
}
