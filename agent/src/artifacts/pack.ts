import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';
import { open, stat, type FileHandle } from 'node:fs/promises';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import tar from 'tar-stream';
import { z } from 'zod';
import { assignmentOutputRuleSchema, GpufarmError, OUTPUT_NOTE_MAX_CHARS, type AssignmentOutputRule } from '@gpufarm/shared';
import { ownChild, type ChildExit } from '@gpufarm/shared/node';
import { openOutputRoot, OutputFilesError, walkOutputRule } from './output-tree.js';

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

/**
 * A file's bytes in chunks, each read into (and as long as) memory from `memory`: all of it,
 * or, with `size`, exactly that many bytes (a file that ends sooner changed while packed).
 */
function fileChunks(openFile: () => Promise<FileHandle>, memory: ChunkMemory, size: { bytes: number; path: string } | null = null): Readable {
  return Readable.from(
    (async function* () {
      const file = await openFile();
      try {
        for (let left = size ? size.bytes : Infinity; left > 0; ) {
          const chunk = await memory.take();
          const want = Math.min(chunk.length, left);
          let bytesRead = 0;
          try {
            bytesRead = READ_SYNC ? readSync(file.fd, chunk, 0, want, null) : (await file.read(chunk, 0, want, null)).bytesRead;
          } finally {
            if (bytesRead === 0) memory.putBack(chunk);
          }
          if (bytesRead === 0) {
            if (size) throw new OutputFilesError(`${size.path} shrank while it was packed`);
            return;
          }
          left -= bytesRead;
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

/** A user to read a job's files as. */
export interface PackAs {
  uid: number;
  gid: number;
}

/**
 * The user to pack `outputDir` as: its owner, the job's user (`giveOutputTo` gave it the
 * folder, and the job, without CAP_CHOWN, cannot give it to anyone else), when this process is
 * root and that owner is not. Null where packing as someone else is not possible (the agent is
 * not root) or gains nothing (the job ran as root).
 */
export async function packingUser(outputDir: string): Promise<PackAs | null> {
  if (process.getuid?.() !== 0) return null;
  const info = await stat(outputDir);
  return info.uid === 0 ? null : { uid: info.uid, gid: info.gid };
}

/**
 * Writes what `rule` covers under the output folder open as `root` into `pack` as tar entries
 * (see `packOutputRule`) and finalizes it. No symlink is followed (`walkOutputRule`); FIFOs,
 * sockets and device nodes are left out unopened.
 * @throws OutputFilesError when the job's files cannot be packed; other errors are the host's
 */
export async function packRuleInto(pack: tar.Pack, root: FileHandle, rule: AssignmentOutputRule, memory: ChunkMemory = freshMemory): Promise<void> {
  for await (const e of walkOutputRule(root, rule, () => undefined)) {
    const header = { name: e.name, mode: e.mode, mtime: e.mtime, uid: 0, gid: 0, uname: '', gname: '' };
    if (e.kind === 'directory') await entry(pack, { ...header, type: 'directory' });
    else if (e.kind === 'symlink') await entry(pack, { ...header, type: 'symlink', linkname: e.linkname ?? '' });
    else {
      const sink = pack.entry({ ...header, type: 'file', size: e.size });
      await pipeline(fileChunks(e.open, memory, { bytes: e.size, path: `/output/${e.name}` }), sink);
    }
  }
  pack.finalize();
}

/**
 * Packs what an output rule covers as a tar stream, hashing it in the same pass, never more
 * than the rule's `maxBytes`. Entries are named relative to /output, in name order, owned by
 * 0:0, with the files' modes and mtimes: packing the same files again gives the same bytes
 * (an upload retry re-packs and checks the hash). No symlink is followed: one under the rule's
 * path (or at its end) is archived as a symlink, one inside it fails the rule; FIFOs, sockets
 * and device nodes are left out. A rule whose path does not exist packs to an empty archive.
 *
 * With `packAs` (`packingUser`) the files are read by a child process running as that user
 * (pack-child.ts), so the kernel checks each read against the job's own permissions.
 *
 * The stream fails with `OutputFilesError` when the job's own files cannot be packed (see
 * `walkOutputRule`), `ArtifactTooLargeError` past the limit, and other errors for the host's
 * failures.
 */
export function packOutputRule(outputDir: string, rule: AssignmentOutputRule, memory = freshMemory, packAs: PackAs | null = null): ArtifactSource {
  if (packAs) return packInChild(outputDir, rule, packAs);
  const pack = tar.pack();
  const limiter = hashingLimiter(rule.maxBytes, rule.path);
  const fill = async () => {
    const root = await openOutputRoot(outputDir);
    try {
      await packRuleInto(pack, root, rule, memory);
    } finally {
      await root.close();
    }
  };
  fill().catch((err: Error) => pack.destroy(err));
  // The limiter is the stream handed out: pipeline destroys it with the error of any stage.
  pipeline(pack, limiter.transform).catch(() => undefined);
  return { stream: limiter.transform, digest: limiter.digest };
}

/** What pack-child.ts is asked (its one argument, JSON). */
export const packChildRequest = z.strictObject({
  outputDir: z.string().min(1),
  rule: assignmentOutputRuleSchema,
  uid: z.int().min(1),
  gid: z.int().min(0),
});
export type PackChildRequest = z.infer<typeof packChildRequest>;

/**
 * What pack-child.ts reports on its fd 3 when it is done: the tar went out whole, or why not
 * (`unpackable`: the job's own files were the cause). Its exit code is not relied on: a hook
 * of the parent's runtime (a test runner's) may still fail at its exit.
 */
export const packChildReport = z.union([z.strictObject({ ok: z.literal(true) }), z.strictObject({ error: z.string(), unpackable: z.boolean() })]);
export type PackChildReport = z.infer<typeof packChildReport>;

/** The child's stderr kept for the error of a child that reported nothing (a crash). */
const CHILD_STDERR_CHARS = 4096;

/**
 * `packOutputRule` in a child process that reads the files as `user` (pack-child.ts): the tar
 * comes on its stdout and is hashed and limited here, and a stream that ended counts only once
 * the child reported it whole. Destroying the stream kills the child.
 */
function packInChild(outputDir: string, rule: AssignmentOutputRule, user: PackAs): ArtifactSource {
  const limiter = hashingLimiter(rule.maxBytes, rule.path);
  const request: PackChildRequest = { outputDir, rule, uid: user.uid, gid: user.gid };
  const childEntry = new URL(import.meta.url.endsWith('.ts') ? './pack-child.ts' : './pack-child.js', import.meta.url);
  // A TypeScript entry (tests, the repository's bin) loads through tsx; the package's is compiled.
  const loader = childEntry.pathname.endsWith('.ts') ? ['--import', import.meta.resolve('tsx')] : [];
  // It starts as root, loads its code, then gives root up itself: its files need not be readable
  // by the job's user. It gets none of the agent's environment.
  const child = spawn(process.execPath, [...loader, fileURLToPath(childEntry), JSON.stringify(request)], { stdio: ['ignore', 'pipe', 'pipe', 'pipe'], env: {}, cwd: '/' });
  const owned = ownChild(child);
  // All three are pipes (stdio above).
  const [, stdout, stderrPipe, reportPipe] = child.stdio as unknown as [null, Readable, Readable, Readable];
  const text = (stream: Readable, keep: number) => {
    let kept = '';
    stream.setEncoding('utf8').on('data', (more: string) => (kept = (kept + more).slice(-keep)));
    const closed = new Promise<void>((resolve) => stream.once('close', resolve));
    return { closed, text: () => kept };
  };
  const stderr = text(stderrPipe, CHILD_STDERR_CHARS);
  // Room for the longest message with every character escaped in JSON.
  const report = text(reportPipe, 8 * OUTPUT_NOTE_MAX_CHARS);
  // Settles once the child exited and its pipes closed (a child that did not start has none).
  const exited = owned.exited.then(async (exit) => {
    if (exit.code !== null || exit.signal !== null) await Promise.all([stderr.closed, report.closed]);
    return exit;
  });
  const failure = ({ code, signal }: ChildExit): Error | null => {
    if (code === null && signal === null) return new Error(`the packer of ${rule.path} did not start`);
    const parsed = packChildReport.safeParse(safeJson(report.text()));
    const said = parsed.success ? parsed.data : null;
    if (said && 'ok' in said) return null;
    if (said?.unpackable) return new OutputFilesError(said.error);
    const why = said ? said.error : `exit ${code ?? signal}${stderr.text().trim() ? `: ${stderr.text().trim()}` : ''}`;
    return new Error(`the packer of ${rule.path} (as ${user.uid}:${user.gid}) failed: ${why}`);
  };
  // Passes the tar through; at its end, fails unless the child said it was whole (a tar cut short by a crash is not an artifact).
  const gate = new Transform({
    transform: (chunk: Buffer, _enc, done) => done(null, chunk),
    flush: (done) => void exited.then((how) => done(failure(how))),
  });
  pipeline(stdout, gate, limiter.transform).catch(() => undefined);
  // Fails at once when the child failed before its stdout ended (it never ends when the child did not start).
  void exited.then((how) => {
    const err = failure(how);
    if (err && !limiter.transform.destroyed) limiter.transform.destroy(err);
  });
  limiter.transform.once('close', () => {
    if (owned.running()) child.kill('SIGKILL');
  });
  return { stream: limiter.transform, digest: limiter.digest };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

function entry(pack: tar.Pack, header: Partial<tar.Header> & { name: string }): Promise<void> {
  return new Promise((resolve, reject) => pack.entry(header, (err) => (err ? reject(err) : resolve())));
}

/** A file as an artifact (the log), hashed while streamed, with 1 MiB reads. */
export function fileSource(path: string, limitBytes = Number.MAX_SAFE_INTEGER, memory = freshMemory): ArtifactSource {
  const limiter = hashingLimiter(limitBytes, path);
  pipeline(fileChunks(() => open(path, 'r'), memory), limiter.transform).catch(() => undefined);
  return { stream: limiter.transform, digest: limiter.digest };
}
