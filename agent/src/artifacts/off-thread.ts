import { Readable } from 'node:stream';
import { Worker } from 'node:worker_threads';
import type { AssignmentOutputRule } from '@gpufarm/shared';
import { OutputFilesError } from './output-tree.js';
import { ArtifactTooLargeError, fileSource, packOutputRule, type ArtifactSource, type PackAs, type PackedDigest } from './pack.js';
import { lendingMemory, packerReply, type PackedArtifact, type PackerReply, type PackerRequest } from './packer-protocol.js';
import { UploadError, type UploadOptions, type UploadResult } from './upload.js';

/** Where artifact sources come from: packed on this thread or on a worker. */
export interface ArtifactSources {
  /** What an output rule covers, as a tar, its files read as `packAs` when set (see `packOutputRule`). */
  rule(outputDir: string, rule: AssignmentOutputRule, packAs?: PackAs | null): ArtifactSource;
  /** A file as it is (the log). */
  file(path: string, limitBytes?: number): ArtifactSource;
  /**
   * Packs and uploads an artifact where it is packed (`uploadArtifact` with a source of its
   * own); absent: the caller uploads what `rule` and `file` give.
   */
  upload?(artifact: PackedArtifact, options: Omit<UploadOptions, 'open'>): Promise<UploadResult>;
}

/** Sources read, packed and hashed on the calling thread. */
export const inThreadSources: ArtifactSources = { rule: (outputDir, rule, packAs) => packOutputRule(outputDir, rule, undefined, packAs), file: fileSource };

interface Open {
  stream: Readable;
  /** The memory the worker lends file chunks in (see pack-worker.ts). */
  memory: SharedArrayBuffer;
  settle: { resolve: (d: PackedDigest) => void; reject: (e: Error) => void };
}

/**
 * Sources read, packed and hashed on a worker thread, with the same functions as
 * `inThreadSources`. Uploading a big artifact on one thread does two things one after the other
 * for every chunk: hash it, then write it to the socket. Here the worker reads and hashes while
 * this thread writes, and the two overlap, so the hash of a big output does not hold up the
 * daemon's link. File chunks are lent, not copied: they lie in the worker's shared memory until
 * the consumer gives them back with `release`, which also lets the worker send more. One worker
 * serves every source; it starts on first use and keeps the process alive only while a source
 * is open.
 */
export class OffThreadPacker implements ArtifactSources {
  private worker: Worker | null = null;
  private nextId = 1;
  private readonly open = new Map<number, Open>();
  private readonly uploads = new Map<number, { resolve: (r: UploadResult) => void; reject: (e: Error) => void }>();

  rule(outputDir: string, rule: AssignmentOutputRule, packAs: PackAs | null = null): ArtifactSource {
    return this.start({ kind: 'rule', outputDir, rule, packAs });
  }

  file(path: string, limitBytes = Number.MAX_SAFE_INTEGER): ArtifactSource {
    return this.start({ kind: 'file', path, limitBytes });
  }

  /**
   * Packs, hashes and uploads on the worker, retries included: the bytes never cross threads
   * and this thread only waits for the result. Throws what `uploadArtifact` throws.
   */
  upload(artifact: PackedArtifact, options: Omit<UploadOptions, 'open'>): Promise<UploadResult> {
    const id = this.nextId++;
    const done = new Promise<UploadResult>((resolve, reject) => this.uploads.set(id, { resolve, reject }));
    this.post({ type: 'upload', id, artifact, options });
    this.worker?.ref();
    return done;
  }

  /** Stops the worker; open sources fail. */
  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = null;
    this.failAll(new Error('the artifact packer was closed'));
    if (worker) await worker.terminate();
  }

  private start(artifact: Extract<PackerRequest, { type: 'open' }>['artifact']): ArtifactSource {
    // Reserved, not touched: the worker writes only the slots it reads into.
    const memory = lendingMemory();
    const id = this.nextId++;
    // No reads to start: the worker sends at most its window of chunks not yet released.
    const stream: Readable = new Readable({
      read: () => undefined,
      destroy: (err, done) => {
        if (this.forget(id)) this.post({ type: 'cancel', id });
        done(err);
      },
    });
    let settle!: Open['settle'];
    const digest = new Promise<PackedDigest>((resolve, reject) => (settle = { resolve, reject }));
    digest.catch(() => undefined);
    const open: Open = { stream, memory, settle };
    this.open.set(id, open);
    this.post({ type: 'open', id, memory, artifact });
    // While a source is open the worker keeps the process alive, as a file read would.
    this.worker?.ref();
    const release = (chunk: Buffer) => {
      if (this.open.get(id) === open) this.post({ type: 'release', id, offset: chunk.buffer === open.memory ? chunk.byteOffset : null });
    };
    return { stream, digest, release };
  }

  /** Drops an open source or upload; an idle worker does not keep the process alive. Returns whether it was open. */
  private forget(id: number): boolean {
    const was = this.open.delete(id) || this.uploads.delete(id);
    if (this.open.size === 0 && this.uploads.size === 0) this.worker?.unref();
    return was;
  }

  private post(request: PackerRequest): void {
    this.ensureWorker().postMessage(request);
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker;
    const entry = new URL(import.meta.url.endsWith('.ts') ? './pack-worker.ts' : './pack-worker.js', import.meta.url);
    // A TypeScript entry needs tsx in the worker too: a worker does not inherit hooks
    // registered at run time (bin/gf-agent.js registers them so).
    const tsx = entry.pathname.endsWith('.ts') ? import.meta.resolve('tsx/esm/api') : null;
    const worker = new Worker(BOOTSTRAP, { eval: true, workerData: { entry: entry.href, tsx } });
    worker.unref();
    worker.on('message', (raw: unknown) => this.onReply(raw));
    worker.on('error', (err) => this.lost(worker, err));
    worker.on('exit', (code) => this.lost(worker, new Error(`the artifact packer stopped (exit code ${code})`)));
    this.worker = worker;
    return worker;
  }

  private onReply(raw: unknown): void {
    const reply = packerReply.parse(raw);
    const upload = this.uploads.get(reply.id);
    if (upload) {
      this.forget(reply.id);
      if (reply.type === 'uploaded') upload.resolve(reply.result);
      else if (reply.type === 'error') upload.reject(packerError(reply));
      return;
    }
    const open = this.open.get(reply.id);
    if (!open) return;
    if (reply.type === 'chunk' || reply.type === 'lent') {
      open.stream.push(reply.type === 'chunk' ? Buffer.from(reply.bytes) : Buffer.from(open.memory, reply.offset, reply.length));
    } else if (reply.type === 'end') {
      this.forget(reply.id);
      open.stream.push(null);
      open.settle.resolve(reply.digest);
    } else {
      this.fail(reply.id, open, reply.type === 'error' ? packerError(reply) : new Error(`unexpected ${reply.type} for a source`));
    }
  }

  private fail(id: number, open: Open, err: Error): void {
    this.forget(id);
    open.settle.reject(err);
    open.stream.destroy(err);
  }

  private lost(worker: Worker, err: Error): void {
    if (this.worker !== worker) return;
    this.worker = null;
    this.failAll(err);
  }

  private failAll(err: Error): void {
    for (const [id, open] of this.open) this.fail(id, open, err);
    for (const [id, upload] of this.uploads) {
      this.forget(id);
      upload.reject(new UploadError(`the upload stopped: ${err.message}`, true, null, { cause: err }));
    }
  }
}

/** The worker's error as the error its functions threw there. */
function packerError(reply: Extract<PackerReply, { type: 'error' }>): Error {
  if (reply.tooLarge) return new ArtifactTooLargeError(reply.tooLarge.limitBytes, reply.tooLarge.path);
  if (reply.unpackable) return new OutputFilesError(reply.message);
  if (reply.upload) return new UploadError(reply.message, reply.upload.retryable, reply.upload.status);
  return new Error(reply.message);
}

/**
 * Loads the worker's module, first registering tsx when it is TypeScript. Only `import()`, so it
 * runs the same whether the worker reads it as a script or a module (`--input-type`).
 */
const BOOTSTRAP = `
import('node:worker_threads').then(async ({ workerData }) => {
  if (workerData.tsx) (await import(workerData.tsx)).register();
  await import(workerData.entry);
});
`;
