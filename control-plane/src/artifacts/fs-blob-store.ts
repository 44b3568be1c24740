import { randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rename, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { checkReadable, hashingLimit, type BlobStore } from './blob-store.js';

const SHA256 = /^[0-9a-f]{64}$/;
/** Read size of a download: large reads keep the signed URL close to a plain file read. */
const READ_CHUNK_BYTES = 1024 * 1024;

/**
 * The filesystem BlobStore: `<dir>/<sha256[0:2]>/<sha256>`, written through `<dir>/tmp/` and
 * renamed into place, so a reader never sees a partial file and equal bytes are one file. A
 * put of bytes already stored renames over the old file (same bytes), which also refreshes
 * its mtime: the expiry sweep leaves recently written blobs alone (`stat().modifiedAt`).
 *
 * @example
 *   const blobs = createFsBlobStore(config.execution.artifactDir);
 *   const { sha256, sizeBytes } = await blobs.put(request.raw, { maxBytes: 1 << 30 });
 */
export function createFsBlobStore(dir: string): BlobStore & { pathOf(sha256: string): string } {
  const tmpDir = join(dir, 'tmp');
  const pathOf = (sha256: string) => {
    if (!SHA256.test(sha256)) throw new Error(`not a sha256: ${JSON.stringify(sha256)}`);
    return join(dir, sha256.slice(0, 2), sha256);
  };
  const statOf = async (sha256: string) => {
    try {
      return await stat(pathOf(sha256));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  };

  return {
    pathOf,

    async put(source: Readable, { maxBytes }: { maxBytes: number }) {
      await mkdir(tmpDir, { recursive: true });
      // A source that failed while the folder was made gets no temp file at all.
      checkReadable(source);
      const tmp = join(tmpDir, randomUUID());
      const counted = hashingLimit(maxBytes);
      try {
        await pipeline(source, counted.stream, createWriteStream(tmp));
        const sha256 = counted.sha256();
        const target = pathOf(sha256);
        await mkdir(join(dir, sha256.slice(0, 2)), { recursive: true });
        await rename(tmp, target);
        return { sha256, sizeBytes: counted.sizeBytes() };
      } catch (err) {
        await unlink(tmp).catch(() => undefined);
        throw err;
      }
    },

    open(sha256: string, range?: { start: number; end: number }): Readable {
      return createReadStream(pathOf(sha256), { highWaterMark: READ_CHUNK_BYTES, ...(range ? { start: range.start, end: range.end } : {}) });
    },

    async stat(sha256: string) {
      const found = await statOf(sha256);
      return found ? { sizeBytes: found.size, modifiedAt: found.mtime } : null;
    },

    async delete(sha256: string) {
      await unlink(pathOf(sha256)).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') throw err;
      });
    },
  };
}
