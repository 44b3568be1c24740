import { createHash } from 'node:crypto';
import { Transform, type Readable } from 'node:stream';
import { GpufarmError } from '@gpufarm/shared';

/**
 * Where artifact bytes live, content-addressed by their SHA-256: the filesystem by default
 * (`fs-blob-store.ts`) or an S3-compatible bucket (`s3-blob-store.ts`).
 */
export interface BlobStore {
  /**
   * Streams `source` in, hashing while it writes; refuses (BlobTooLargeError) past `maxBytes`
   * and then keeps nothing. Equal bytes are stored once.
   */
  put(source: Readable, options: { maxBytes: number }): Promise<{ sha256: string; sizeBytes: number }>;
  /** The bytes of `sha256` (a byte range, inclusive, when given). */
  open(sha256: string, range?: { start: number; end: number }): Readable;
  /**
   * Size of the stored bytes, or null when absent; `modifiedAt` when the store knows when the
   * bytes were last written (a put of equal bytes counts): the expiry sweep spares fresh blobs.
   */
  stat(sha256: string): Promise<{ sizeBytes: number; modifiedAt?: Date } | null>;
  delete(sha256: string): Promise<void>;
  /**
   * A URL that reads the bytes straight from the store for `ttlSeconds`, served as an attachment
   * named `filename`; absent when the store has none (downloads then go through `/files/<id>`).
   */
  presign?(sha256: string, options: { filename: string; ttlSeconds: number; now?: number }): Promise<{ url: string; expiresAt: Date }>;
}

/**
 * A pass-through that hashes and counts what flows through it and fails with BlobTooLargeError
 * once more than `maxBytes` arrived; `sha256()` is read after the stream ended.
 */
export function hashingLimit(maxBytes: number): { stream: Transform; sha256(): string; sizeBytes(): number } {
  const hash = createHash('sha256');
  let size = 0;
  const stream = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      size += chunk.length;
      if (size > maxBytes) return done(new BlobTooLargeError(maxBytes));
      hash.update(chunk);
      done(null, chunk);
    },
  });
  return { stream, sha256: () => hash.digest('hex'), sizeBytes: () => size };
}

/** A source that failed or closed before the store read it (a client gone) is not stored at all. */
export function checkReadable(source: Readable): void {
  if (source.errored) throw source.errored;
  if (source.destroyed) throw new Error('the source closed before it was read');
}

/** The stream passed `maxBytes`; nothing was kept. */
export class BlobTooLargeError extends GpufarmError<'payload_too_large'> {
  constructor(readonly maxBytes: number) {
    super('payload_too_large', `the upload is larger than ${maxBytes} bytes; send at most ${maxBytes} bytes`);
  }
}
