/**
 * The worker side of `OffThreadPacker` (off-thread.ts): builds artifact sources with the same
 * functions as the main thread (`packOutputRule`, `fileSource`: read, tar and hash in one pass)
 * and hands each chunk to the main thread, which only writes them to the socket. File chunks
 * move without a copy (their memory is transferred); at most `WINDOW_CHUNKS` are on their way.
 */
import { parentPort } from 'node:worker_threads';
import { ArtifactTooLargeError, fileSource, movableChunks, packOutputRule, type ArtifactSource } from './pack.js';
import { packerRequest, type PackerReply } from './packer-protocol.js';

/** Chunks sent and not yet taken by the main thread's stream, per source. */
const WINDOW_CHUNKS = 8;

interface Running {
  source: ArtifactSource;
  inFlight: number;
}

const port = parentPort;
if (!port) throw new Error('pack-worker.ts runs as a worker thread');
const running = new Map<number, Running>();
const send = (reply: PackerReply, transfer: ArrayBuffer[] = []) => port.postMessage(reply, transfer);

port.on('message', (raw: unknown) => {
  const request = packerRequest.parse(raw);
  if (request.type === 'open') {
    const source = request.artifact.kind === 'rule' ? packOutputRule(request.artifact.outputDir, request.artifact.rule) : fileSource(request.artifact.path, request.artifact.limitBytes);
    start(request.id, source);
    return;
  }
  const run = running.get(request.id);
  if (!run) return;
  if (request.type === 'taken') {
    run.inFlight -= request.chunks;
    if (run.inFlight < WINDOW_CHUNKS) run.source.stream.resume();
  } else {
    running.delete(request.id);
    run.source.stream.destroy();
  }
});

function start(id: number, source: ArtifactSource): void {
  const run: Running = { source, inFlight: 0 };
  running.set(id, run);
  source.stream.on('data', (chunk: Buffer) => {
    // File data read for this stream alone moves; anything else (tar headers) is copied.
    const movable = chunk.buffer instanceof ArrayBuffer && movableChunks.has(chunk.buffer) && chunk.byteOffset === 0 && chunk.byteLength === chunk.buffer.byteLength;
    const bytes = movable ? (chunk.buffer as ArrayBuffer) : (new Uint8Array(chunk).buffer as ArrayBuffer);
    send({ type: 'chunk', id, bytes }, [bytes]);
    if (++run.inFlight >= WINDOW_CHUNKS) source.stream.pause();
  });
  source.stream.once('error', () => undefined);
  // The digest is known at the limiter's flush, maybe before its last chunks left: wait for the end.
  source.stream.once('end', () => {
    void source.digest.then((digest) => {
      if (running.delete(id)) send({ type: 'end', id, digest });
    });
  });
  source.digest.catch((err: Error) => {
    if (!running.delete(id)) return;
    const tooLarge = err instanceof ArtifactTooLargeError ? { limitBytes: err.limitBytes, path: err.path } : null;
    send({ type: 'error', id, message: err.message, tooLarge });
  });
}
