import { createHash } from 'node:crypto';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import { ApiError, errorText, OUTPUT_FILES_MAX } from '@gpufarm/shared';
import type { Database } from '../db/database.js';
import type { BlobStore } from './blob-store.js';
import { indexedTarSha256, saveOutputIndex, type TarFile, type TarIndex } from './output-index-store.js';
import type { ArtifactRow } from './store.js';

/**
 * The file list of an output tar: read once, when the run is settled (execution/finish.ts),
 * from the stored bytes, and kept in PostgreSQL (`output_indexes`, `output_index_files`). Each
 * regular file is listed with its size, its SHA-256 and where its bytes start in the tar, so one
 * file is served later by reading just that range of the blob and checking it against the hash.
 * Nothing is ever written to disk from a tar: names are only text here.
 */

/** Longest member path listed; a longer one counts as an unsafe name. */
const MAX_PATH_CHARS = 4096;
/** A tar header block: the bytes of an entry start right after its own header. */
const TAR_BLOCK = 512;

/**
 * The path a member is listed under, or null when it is not safe to show as a relative path
 * (absolute, a `..` segment, control characters, empty, or over MAX_PATH_CHARS): leading `./`
 * and trailing `/` are dropped, as tar itself writes and reads them.
 */
export function safeMemberPath(name: string): string | null {
  const path = name.replace(/^(\.\/)+/, '').replace(/\/+$/, '');
  if (path === '' || path === '.' || path.length > MAX_PATH_CHARS) return null;
  if (path.startsWith('/') || path.split('/').includes('..')) return null;
  // eslint-disable-next-line no-control-regex -- control characters are what this refuses
  if (/[\u0000-\u001f\u007f]/.test(path)) return null;
  return path;
}

/** The store failed while the tar was read: not the tar's fault, so nothing is recorded. */
export class OutputReadError extends Error {
  override name = 'OutputReadError';
}

/**
 * Reads a tar stream to its end: lists its first `maxFiles` regular files with safe names
 * (`safeMemberPath`), hashing each, and counts the rest. Links and other special entries are
 * counted, never followed; folders are implied by the paths. Memory stays bounded whatever the
 * entry count (past `maxFiles` a file is only counted). A stream that is not a tar, or ends
 * inside one, answers `unreadable` with the parser's reason; a failure of `source` itself
 * throws OutputReadError.
 */
export async function indexTar(source: Readable, options: { maxFiles?: number } = {}): Promise<TarIndex> {
  const maxFiles = options.maxFiles ?? OUTPUT_FILES_MAX;
  const whole = createHash('sha256');
  const files: TarFile[] = [];
  const skipped = { links: 0, other: 0, unsafeNames: 0 };
  let fileCount = 0;
  const extract = tar.extract();
  extract.on('entry', (header, stream, next) => {
    // A tar cut short fails the entry's stream too: the extract's own error is the one reported.
    stream.on('error', () => undefined);
    const drain = () => {
      stream.on('end', () => next());
      stream.resume();
    };
    if (header.type === 'file' || header.type === 'contiguous-file') {
      const path = safeMemberPath(header.name);
      if (path === null) {
        skipped.unsafeNames++;
        return drain();
      }
      fileCount++;
      if (files.length >= maxFiles) return drain();
      const hash = createHash('sha256');
      let size = 0;
      stream.on('data', (data: unknown) => {
        const chunk = data as Buffer;
        hash.update(chunk);
        size += chunk.length;
      });
      stream.on('end', () => {
        files.push({ path, sizeBytes: size, sha256: hash.digest('hex'), dataOffset: stream.offset + TAR_BLOCK });
        next();
      });
      return;
    }
    if (header.type === 'symlink' || header.type === 'link') skipped.links++;
    else if (header.type !== 'directory') skipped.other++;
    drain();
  });
  let failed: 'source' | 'tar' | null = null;
  source.once('error', () => (failed ??= 'source'));
  extract.once('error', () => (failed ??= 'tar'));
  const hashing = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      whole.update(chunk);
      done(null, chunk);
    },
  });
  try {
    // pipeline: a failure of any side destroys all of them, so no file stays open.
    await pipeline(source, hashing, extract);
  } catch (err) {
    if (failed !== 'tar') throw new OutputReadError(`the stored output could not be read: ${errorText(err)}`, { cause: err });
    return { tarSha256: '', state: 'unreadable', reason: `not a tar the server can read: ${errorText(err)}`, files: [], fileCount: 0, skipped };
  }
  return { tarSha256: whole.digest('hex'), state: 'indexed', reason: null, files, fileCount, skipped };
}

/**
 * Indexes the stored bytes of an output artifact, unless they are indexed already (settlement
 * may run again). Bytes that do not hash to the row's SHA-256 are recorded as unreadable: the
 * list is only ever made from the tar the result names. A store failure throws OutputReadError
 * and records nothing.
 */
export async function indexOutputArtifact(deps: { db: Database; blobs: BlobStore }, row: Pick<ArtifactRow, 'id' | 'sha256'>): Promise<void> {
  if ((await indexedTarSha256(deps.db, row.id)) === row.sha256) return;
  const index = await indexTar(deps.blobs.open(row.sha256));
  const checked: TarIndex =
    index.state === 'indexed' && index.tarSha256 !== row.sha256
      ? { ...index, state: 'unreadable', reason: `the stored bytes hash to ${index.tarSha256}, not the recorded ${row.sha256}`, files: [], fileCount: 0 }
      : index;
  await saveOutputIndex(deps.db, row.id, { ...checked, tarSha256: row.sha256 });
}

/**
 * The bytes of `file` read out of the stored tar, checked against its indexed SHA-256: the last
 * chunk is held back until the hash is known, so bytes that differ end the stream with an error
 * before the whole file went out: an `internal` error when nothing was sent yet, else a
 * response cut short, never complete.
 */
export function openOutputFile(blobs: BlobStore, tarSha256: string, file: TarFile): Readable {
  const hash = createHash('sha256');
  let held: Buffer | null = null;
  const check = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      const out = held;
      held = chunk;
      done(null, out ?? undefined);
    },
    flush(done) {
      const got = hash.digest('hex');
      if (got !== file.sha256) {
        return done(new ApiError('internal', `The stored bytes of ${file.path} hash to ${got}, not the ${file.sha256} listed for it: they are not served. Contact support with the requestId.`));
      }
      done(null, held ?? undefined);
    },
  });
  if (file.sizeBytes === 0) {
    check.end();
    return check;
  }
  const source = blobs.open(tarSha256, { start: file.dataOffset, end: file.dataOffset + file.sizeBytes - 1 });
  source.on('error', (err) => check.destroy(err));
  return source.pipe(check);
}

/** A Content-Disposition for a file's base name: an ASCII fallback and the UTF-8 name (RFC 6266). */
export function attachmentDisposition(path: string): string {
  const base = path.slice(path.lastIndexOf('/') + 1) || 'file';
  const ascii = base.replace(/[^A-Za-z0-9._-]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(base)}`;
}
