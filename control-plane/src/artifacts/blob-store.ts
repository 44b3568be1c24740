import type { Readable } from 'node:stream';
import { GpufarmError } from '@gpufarm/shared';

/**
 * Where artifact bytes live, content-addressed by their SHA-256: the filesystem by default
 * (`fs-blob-store.ts`), an S3-compatible bucket later behind the same interface.
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
}

/** The stream passed `maxBytes`; nothing was kept. */
export class BlobTooLargeError extends GpufarmError<'payload_too_large'> {
  constructor(readonly maxBytes: number) {
    super('payload_too_large', `the upload is larger than ${maxBytes} bytes; send at most ${maxBytes} bytes`);
  }
}
