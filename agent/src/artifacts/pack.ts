import { createHash } from 'node:crypto';
import { readSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';
import { lstat, open, readdir, readlink } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import { GpufarmError, type AssignmentOutputRule } from '@gpufarm/shared';

/** What a packed artifact came to: its SHA-256 (hex) and size, both of the bytes streamed. */
export interface PackedDigest {
  sha256: string;
  sizeBytes: number;
}

/** A stream of an artifact's bytes and, once it ended, their digest. */
export interface ArtifactSource {
  stream: Readable;
  /** Rejects with `ArtifactTooLargeError` when the bytes pass the limit. */
  digest: Promise<PackedDigest>;
  /**
   * Set when the stream's chunks are lent (`OffThreadPacker`): a chunk stays valid until it is
   * passed here, and the source sends only a few chunks not yet released, so a consumer must
   * release every chunk it takes (and copy what it keeps). Without it the consumer owns them.
   */
  release?: (chunk: Buffer) => void;
}

/** The artifact passed its limit; the stream was cut before the limit was passed. */
export class ArtifactTooLargeError extends GpufarmError<'artifact_too_large'> {
  constructor(
    readonly limitBytes: number,
    readonly path: string,
  ) {
    super('artifact_too_large', `${path} is more than its ${limitBytes}-byte limit`);
  }
}

/** Read size for files and uploads. */
export const CHUNK_BYTES = 1024 * 1024;

/**
 * Where file chunks are read into: `take` gives memory a read fills, which nothing else uses
 * meanwhile; `putBack` returns memory taken and not filled (the read at the end of a file, or
 * one that failed), or a pool of a few buffers would lose one per file and stall.
 */
export interface ChunkMemory {
  take(): Promise<Buffer>;
  putBack(chunk: Buffer): void;
}

/**
 * Where in an allocation a file chunk starts. Large allocations begin 16 bytes past a page
 * boundary (the allocator's header), and on AMD EPYC the kernel copies a read into memory that
 * begins 1 to 31 bytes past a page boundary several times slower (each store falsely waits on
 * a load 4 KiB away, at the same page offset).
 */
export const READ_ALIGN = 64;

/** `CHUNK_BYTES` of new memory, `READ_ALIGN` bytes into its allocation. */
export function alignedChunk(): Buffer {
  return Buffer.allocUnsafeSlow(READ_ALIGN + CHUNK_BYTES).subarray(READ_ALIGN);
}

const freshMemory: ChunkMemory = { take: () => Promise.resolve(alignedChunk()), putBack: () => undefined };

/**
 * A few chunk buffers used over and over, for a source read and sent on one thread: `take`
 * gives a free one (or waits for one), `release` takes a chunk back once the socket took it. The
 * buffer just released is the next one read into, while it is still in the CPU's cache.
 */
export class ChunkPool implements ChunkMemory {
  private readonly free: Buffer[] = [];
  private readonly whole = new Map<ArrayBufferLike, Buffer>();
  private waiting: { resolve: (b: Buffer) => void; reject: (e: Error) => void }[] = [];

  constructor(slots: number, bytes: number) {
    for (let i = 0; i < slots; i++) {
      const buffer = Buffer.allocUnsafeSlow(READ_ALIGN + bytes).subarray(READ_ALIGN);
      this.whole.set(buffer.buffer, buffer);
      this.free.push(buffer);
    }
  }

  readonly take = (): Promise<Buffer> => {
    const free = this.free.pop();
    if (free) return Promise.resolve(free);
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  };

  /** Takes back a chunk of this pool (others, such as tar headers, are ignored). */
  readonly release = (chunk: Buffer): void => {
    const buffer = this.whole.get(chunk.buffer);
    if (!buffer) return;
    const next = this.waiting.shift();
    if (next) next.resolve(buffer);
    else this.free.push(buffer);
  };

  readonly putBack = this.release;

  /** Fails reads still waiting for a buffer (their source was given up), so their files close. */
  close(): void {
    for (const w of this.waiting.splice(0)) w.reject(new Error('the artifact source was closed'));
  }
}

/**
 * On a worker thread (`OffThreadPacker`) files are read synchronously: that thread has nothing
 * else to do meanwhile, and the hop through the thread pool cost more than it saved there.
 */
const READ_SYNC = !isMainThread;

/** A file's bytes in chunks, each read into (and as long as) memory from `memory`. */
function fileChunks(path: string, memory: ChunkMemory): Readable {
  return Readable.from(
    (async function* () {
      const file = await open(path, 'r');
      try {
        for (;;) {
          const chunk = await memory.take();
          let bytesRead = 0;
          try {
            bytesRead = READ_SYNC ? readSync(file.fd, chunk, 0, chunk.length, null) : (await file.read(chunk, 0, chunk.length, null)).bytesRead;
          } finally {
            if (bytesRead === 0) memory.putBack(chunk);
          }
          if (bytesRead === 0) return;
          yield bytesRead === chunk.length ? chunk : chunk.subarray(0, bytesRead);
        }
      } finally {
        await file.close();
      }
    })(),
    { objectMode: false, highWaterMark: CHUNK_BYTES },
  );
}

/**
 * Hashes and counts the bytes going through, in the same pass; never lets more than
 * `limitBytes` through (it fails with `ArtifactTooLargeError` first).
 */
export function hashingLimiter(limitBytes: number, label: string): { transform: Transform; digest: Promise<PackedDigest> } {
  const hash = createHash('sha256');
  let size = 0;
  let settle!: { resolve: (d: PackedDigest) => void; reject: (e: Error) => void };
  const digest = new Promise<PackedDigest>((resolve, reject) => (settle = { resolve, reject }));
  digest.catch(() => undefined);
  const transform = new Transform({
    highWaterMark: CHUNK_BYTES,
    transform(chunk: Buffer, _enc, done) {
      if (size + chunk.length > limitBytes) {
        const err = new ArtifactTooLargeError(limitBytes, label);
        settle.reject(err);
        return done(err);
      }
      size += chunk.length;
      hash.update(chunk);
      done(null, chunk);
    },
    flush(done) {
      settle.resolve({ sha256: hash.digest('hex'), sizeBytes: size });
      done();
    },
  });
  transform.on('error', (err) => settle.reject(err));
  return { transform, digest };
}

interface Entry {
  path: string;
  name: string;
  kind: 'file' | 'directory' | 'symlink';
  size: number;
  mode: number;
  mtime: Date;
}

/** Regular files, folders and symlinks under `root` in name order (symlinks are not followed). */
async function walk(root: string, base: string): Promise<Entry[]> {
  const info = await lstat(root).catch(() => null);
  if (!info) return [];
  const name = relative(base, root) || '.';
  const entry = (kind: Entry['kind']): Entry => ({ path: root, name, kind, size: kind === 'file' ? info.size : 0, mode: info.mode & 0o7777, mtime: info.mtime });
  if (info.isSymbolicLink()) return [entry('symlink')];
  if (info.isFile()) return [entry('file')];
  if (!info.isDirectory()) return [];
  const out: Entry[] = name === '.' ? [] : [entry('directory')];
  const names = (await readdir(root)).sort();
  for (const child of names) out.push(...(await walk(join(root, child), base)));
  return out;
}

/** Bytes of the regular files a rule covers (a lower bound of its tar's size). */
export async function ruleContentBytes(outputDir: string, rule: AssignmentOutputRule): Promise<number> {
  const entries = await walk(hostPathOf(outputDir, rule), outputDir);
  return entries.reduce((n, e) => n + e.size, 0);
}

export function hostPathOf(outputDir: string, rule: AssignmentOutputRule): string {
  return join(outputDir, rule.path.slice('/output'.length));
}

/**
 * Packs what an output rule covers as a tar stream, hashing it in the same pass, never more
 * than the rule's `maxBytes`. Entries are named relative to /output, in name order, owned by
 * 0:0, with the files' modes and mtimes: packing the same files again gives the same bytes
 * (an upload retry re-packs and checks the hash). A rule whose path does not exist packs to
 * an empty archive.
 */
export function packOutputRule(outputDir: string, rule: AssignmentOutputRule, memory = freshMemory): ArtifactSource {
  const pack = tar.pack();
  const limiter = hashingLimiter(rule.maxBytes, rule.path);
  const fill = async () => {
    for (const e of await walk(hostPathOf(outputDir, rule), outputDir)) {
      const header = { name: e.name, mode: e.mode, mtime: e.mtime, uid: 0, gid: 0, uname: '', gname: '' };
      if (e.kind === 'directory') await entry(pack, { ...header, type: 'directory' });
      else if (e.kind === 'symlink') await entry(pack, { ...header, type: 'symlink', linkname: await readlink(e.path) });
      else {
        const sink = pack.entry({ ...header, type: 'file', size: e.size });
        await pipeline(fileChunks(e.path, memory), sink);
      }
    }
    pack.finalize();
  };
  fill().catch((err: Error) => pack.destroy(err));
  // The limiter is the stream handed out: pipeline destroys it with the error of any stage.
  pipeline(pack, limiter.transform).catch(() => undefined);
  return { stream: limiter.transform, digest: limiter.digest };
}

function entry(pack: tar.Pack, header: Partial<tar.Header> & { name: string }): Promise<void> {
  return new Promise((resolve, reject) => pack.entry(header, (err) => (err ? reject(err) : resolve())));
}

/** A file as an artifact (the log), hashed while streamed, with 1 MiB reads. */
export function fileSource(path: string, limitBytes = Number.MAX_SAFE_INTEGER, memory = freshMemory): ArtifactSource {
  const limiter = hashingLimiter(limitBytes, path);
  pipeline(fileChunks(path, memory), limiter.transform).catch(() => undefined);
  return { stream: limiter.transform, digest: limiter.digest };
}
