/**
 * The worker side of `OffThreadPacker` (off-thread.ts): builds artifact sources with the same
 * functions as the main thread (`packOutputRule`, `fileSource`: read, tar and hash in one pass)
 * and hands each chunk to the main thread, which only writes them to the socket. Files are read
 * into a few slots of shared memory per source, lent to the main thread until the socket took
 * them: no memory is allocated per chunk, so a big upload leaves no garbage to collect. Other
 * chunks (tar headers) are copied. At most `WINDOW_CHUNKS` are on their way: the consumer
 * releases each chunk, lent or copied, once done with it.
 *
 * An upload asked of the worker (`OffThreadPacker.upload`) runs here whole: read, tar, hash and
 * the HTTP requests, so its bytes never cross threads.
 */
import { parentPort } from 'node:worker_threads';
import { ArtifactTooLargeError, CHUNK_BYTES, ChunkPool, READ_ALIGN, fileSource, packOutputRule, type ArtifactSource, type ChunkMemory } from './pack.js';
import { OutputFilesError } from './output-tree.js';
import { LENDING_SLOTS, packerRequest, type PackedArtifact, type PackerReply } from './packer-protocol.js';
import { uploadArtifact, UploadError, type UploadOptions } from './upload.js';
import { errorText } from '@gpufarm/shared';

/** Chunks sent and not yet released by the consumer, per source. */
const WINDOW_CHUNKS = 8;

/** A source's shared memory (`lendingMemory()`), handed out a slot at a time. */
class LendingMemory implements ChunkMemory {
  private readonly free: number[] = [];
  private readonly waiting: { resolve: (b: Buffer) => void; reject: (e: Error) => void }[] = [];

  constructor(private readonly memory: SharedArrayBuffer) {
    for (let slot = LENDING_SLOTS - 1; slot >= 0; slot--) this.free.push(READ_ALIGN + slot * CHUNK_BYTES);
  }

  /** A free slot to read into; when all are lent, the next one the main thread releases. */
  readonly take = (): Promise<Buffer> => {
    const offset = this.free.pop();
    if (offset !== undefined) return Promise.resolve(this.slot(offset));
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  };

  /** A slot taken and not filled (the read at a file's end) is free again. */
  readonly putBack = (chunk: Buffer): void => {
    const offset = this.offsetOf(chunk);
    if (offset !== null) this.release(offset);
  };

  /** Where `chunk` lies in this memory, or null when it is other memory. */
  offsetOf(chunk: Buffer): number | null {
    return chunk.buffer === this.memory ? chunk.byteOffset : null;
  }

  release(offset: number): void {
    const next = this.waiting.shift();
    if (next) next.resolve(this.slot(offset));
    else this.free.push(offset);
  }

  /** Fails reads waiting for a slot (the source ended early). */
  close(): void {
    for (const w of this.waiting.splice(0)) w.reject(new Error('the artifact source was closed'));
  }

  private slot(offset: number): Buffer {
    return Buffer.from(this.memory, offset, CHUNK_BYTES);
  }
}

interface Running {
  source: ArtifactSource;
  memory: LendingMemory;
  inFlight: number;
}

const port = parentPort;
if (!port) throw new Error('pack-worker.ts runs as a worker thread');
const running = new Map<number, Running>();
const send = (reply: PackerReply, transfer: ArrayBuffer[] = []) => port.postMessage(reply, transfer);

port.on('message', (raw: unknown) => {
  const request = packerRequest.parse(raw);
  if (request.type === 'upload') {
    void upload(request.id, request.artifact, request.options);
    return;
  }
  if (request.type === 'open') {
    const memory = new LendingMemory(request.memory);
    const { artifact } = request;
    const source = artifact.kind === 'rule' ? packOutputRule(artifact.outputDir, artifact.rule, memory, artifact.packAs) : fileSource(artifact.path, artifact.limitBytes, memory);
    start(request.id, source, memory);
    return;
  }
  const run = running.get(request.id);
  if (!run) return;
  if (request.type === 'release') {
    if (request.offset !== null) run.memory.release(request.offset);
    if (--run.inFlight < WINDOW_CHUNKS) run.source.stream.resume();
  } else {
    stop(request.id);
    run.source.stream.destroy();
  }
});

function start(id: number, source: ArtifactSource, memory: LendingMemory): void {
  const run: Running = { source, memory, inFlight: 0 };
  running.set(id, run);
  source.stream.on('data', (chunk: Buffer) => {
    const offset = memory.offsetOf(chunk);
    if (offset !== null) send({ type: 'lent', id, offset, length: chunk.length });
    else {
      const bytes = new Uint8Array(chunk).buffer as ArrayBuffer;
      send({ type: 'chunk', id, bytes }, [bytes]);
    }
    if (++run.inFlight >= WINDOW_CHUNKS) source.stream.pause();
  });
  source.stream.once('error', () => undefined);
  // The digest is known at the limiter's flush, maybe before its last chunks left: wait for the end.
  source.stream.once('end', () => {
    void source.digest.then((digest) => {
      if (stop(id)) send({ type: 'end', id, digest });
    });
  });
  source.digest.catch((err: Error) => {
    if (!stop(id)) return;
    const tooLarge = err instanceof ArtifactTooLargeError ? { limitBytes: err.limitBytes, path: err.path } : null;
    send({ type: 'error', id, message: err.message, tooLarge, unpackable: err instanceof OutputFilesError });
  });
}

/** Forgets a source; returns whether it was running. */
function stop(id: number): boolean {
  const run = running.get(id);
  run?.memory.close();
  return running.delete(id);
}

/**
 * Read size and buffers of an upload made here: small buffers, each read into, hashed and
 * written to the socket on this one thread and read into again once the socket took it, stay in
 * the CPU's cache; 4 MiB in all keep the socket busy. Handing 1 MiB chunks to another thread
 * cost more CPU than sending them.
 */
const UPLOAD_CHUNK_BYTES = 256 * 1024;
const UPLOAD_SLOTS = 16;

/** Packs, hashes and uploads an artifact on this thread, retries included; answers its result or error. */
async function upload(id: number, artifact: PackedArtifact, options: Omit<UploadOptions, 'open'>): Promise<void> {
  const pools: ChunkPool[] = [];
  const open = (): ArtifactSource => {
    const pool = new ChunkPool(UPLOAD_SLOTS, UPLOAD_CHUNK_BYTES);
    pools.push(pool);
    const source = artifact.kind === 'rule' ? packOutputRule(artifact.outputDir, artifact.rule, pool, artifact.packAs) : fileSource(artifact.path, artifact.limitBytes, pool);
    return { ...source, release: pool.release };
  };
  try {
    send({ type: 'uploaded', id, result: await uploadArtifact({ ...options, open }) });
  } catch (err) {
    const tooLarge = err instanceof ArtifactTooLargeError ? { limitBytes: err.limitBytes, path: err.path } : null;
    const failed = err instanceof UploadError ? { retryable: err.retryable, status: err.status } : null;
    send({ type: 'error', id, message: errorText(err), tooLarge, upload: failed, unpackable: err instanceof OutputFilesError });
  } finally {
    for (const pool of pools) pool.close();
  }
}
