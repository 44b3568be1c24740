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
  /** Uploads a sender makes straight to the store (presigned parts); absent when it has none. */
  direct?: DirectUploads;
}

/** An upload begun in the store: where it goes, and the URLs its parts are PUT to. */
export interface DirectUpload {
  /** The temporary object the parts become. */
  key: string;
  /** The store's id of the multipart upload. */
  storeUploadId: string;
  partBytes: number;
  partUrls: string[];
  expiresAt: Date;
}

/** Uploads that do not pass through the control plane; it completes them and reads them back. */
export interface DirectUploads {
  /**
   * Begins an upload of at most `maxBytes`: `partUrls.length` parts of `partBytes` cover the
   * limit and less than one part more (`planParts`), each URL valid `ttlSeconds`.
   */
  begin(options: { maxBytes: number; ttlSeconds: number; now?: number }): Promise<DirectUpload>;
  /**
   * Completes the upload from the sender's part list, then reads the whole object back, hashing
   * it: only bytes equal to `expected` (and within `maxBytes`) are kept, at their content key.
   * Otherwise nothing is kept and it throws BlobTooLargeError or DirectUploadMismatchError.
   */
  finish(upload: Pick<DirectUpload, 'key' | 'storeUploadId'>, options: { parts: { partNumber: number; etag: string }[]; maxBytes: number; expected: { sha256: string; sizeBytes: number } }): Promise<{ sha256: string; sizeBytes: number }>;
  /** Drops an upload never finished: its parts and its object, if it was completed. */
  abort(upload: Pick<DirectUpload, 'key' | 'storeUploadId'>): Promise<void>;
}

/** S3's limits: parts but the last at least 5 MiB, at most 10,000 parts. */
const MIN_PART_BYTES = 5 * 1024 * 1024;
const MAX_PARTS = 10_000;
/** What a sender holds in memory per part (it must know each part's length before sending it). */
export const TARGET_PART_BYTES = 8 * 1024 * 1024;

/**
 * Parts for an upload of at most `maxBytes`: as many parts of at least TARGET_PART_BYTES as fit
 * in the limit, each the limit divided among them (rounded up), so the parts add up to the
 * limit and less than one byte per part more. A limit under a part is one part of the limit.
 */
export function planParts(maxBytes: number): { partBytes: number; partCount: number } {
  if (maxBytes <= TARGET_PART_BYTES) return { partBytes: maxBytes, partCount: 1 };
  const partCount = Math.min(Math.floor(maxBytes / TARGET_PART_BYTES), MAX_PARTS);
  const partBytes = Math.ceil(maxBytes / partCount);
  if (partCount > 1 && partBytes < MIN_PART_BYTES) throw new Error(`parts of ${partBytes} bytes are under the store's minimum`);
  return { partBytes, partCount };
}

/** The object read back hashed otherwise than the sender said; it was deleted. */
export class DirectUploadMismatchError extends GpufarmError<'conflict'> {
  constructor(
    /** `sha256` null: the size differed, so the object was not read. */
    readonly stored: { sha256: string | null; sizeBytes: number },
    readonly expected: { sha256: string; sizeBytes: number },
  ) {
    super('conflict', `the stored object is ${stored.sizeBytes} bytes${stored.sha256 ? ` with sha256 ${stored.sha256}` : ''}, not the declared ${expected.sizeBytes} bytes with sha256 ${expected.sha256}`);
  }
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
