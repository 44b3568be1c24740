import { randomUUID } from 'node:crypto';
import { PassThrough, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { CopyObjectCommand, DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { S3StoreConfig } from '../config.js';
import { checkReadable, hashingLimit, type BlobStore } from './blob-store.js';

const SHA256 = /^[0-9a-f]{64}$/;
/** Multipart part size: S3's minimum, so an upload holds at most `UPLOAD_QUEUE` of these in memory. */
const PART_BYTES = 5 * 1024 * 1024;
const UPLOAD_QUEUE = 2;
/** Buffer of a download stream, as the filesystem store reads. */
const READ_CHUNK_BYTES = 1024 * 1024;

/** Key prefixes in the bucket: content-addressed blobs, and uploads whose hash is not known yet. */
export const S3_BLOB_PREFIX = 'blobs/';
export const S3_TMP_PREFIX = 'tmp/';

/** The SDK client for `config`: path-style for self-hosted servers, static credentials when given. */
export function createS3Client(config: S3StoreConfig): S3Client {
  return new S3Client({
    region: config.region,
    forcePathStyle: config.forcePathStyle,
    ...(config.endpoint ? { endpoint: config.endpoint } : {}),
    ...(config.credentials ? { credentials: { accessKeyId: config.credentials.accessKeyId, secretAccessKey: config.credentials.secretAccessKey.reveal() } } : {}),
  });
}

const isNotFound = (err: unknown) => err instanceof S3ServiceException && err.$metadata.httpStatusCode === 404;

/**
 * The S3 BlobStore: `<bucket>/blobs/<sha256>`. A put streams the bytes to `tmp/<uuid>` (a
 * multipart upload, hashing and counting on the way), then copies that object to its content
 * key inside the bucket and deletes it: the key is the hash, known only once the last byte
 * passed. Copying over an existing key (equal bytes) refreshes its LastModified, which the
 * expiry sweep reads as `stat().modifiedAt`. CopyObject takes objects up to 5 GiB, the spec's
 * largest output rule.
 *
 * @example
 *   const blobs = createS3BlobStore(createS3Client(config.execution.s3), config.execution.s3.bucket);
 */
export function createS3BlobStore(client: S3Client, bucket: string): BlobStore & { keyOf(sha256: string): string } {
  const keyOf = (sha256: string) => {
    if (!SHA256.test(sha256)) throw new Error(`not a sha256: ${JSON.stringify(sha256)}`);
    return `${S3_BLOB_PREFIX}${sha256}`;
  };
  const deleteKey = (key: string) => client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));

  return {
    keyOf,

    async put(source: Readable, { maxBytes }: { maxBytes: number }) {
      checkReadable(source);
      const tmpKey = `${S3_TMP_PREFIX}${randomUUID()}`;
      const counted = hashingLimit(maxBytes);
      const upload = new Upload({
        client,
        params: { Bucket: bucket, Key: tmpKey, Body: counted.stream, ContentType: 'application/octet-stream' },
        partSize: PART_BYTES,
        queueSize: UPLOAD_QUEUE,
      });
      // A failed upload stops reading: the body is destroyed so the feeding side stops too, not
      // wait on backpressure. The feeding side's error (too large, the client gone) is the one to
      // report; the upload then fails on the broken body.
      const sending = upload.done().catch((err: unknown) => {
        counted.stream.destroy(err instanceof Error ? err : new Error(String(err)));
        throw err;
      });
      const [fed, sent] = await Promise.allSettled([pipeline(source, counted.stream), sending]);
      try {
        if (fed.status === 'rejected') throw fed.reason;
        if (sent.status === 'rejected') throw sent.reason;
        const sha256 = counted.sha256();
        await client.send(new CopyObjectCommand({ Bucket: bucket, Key: keyOf(sha256), CopySource: `${bucket}/${tmpKey}`, MetadataDirective: 'REPLACE', ContentType: 'application/octet-stream' }));
        await deleteKey(tmpKey);
        return { sha256, sizeBytes: counted.sizeBytes() };
      } catch (err) {
        await upload.abort().catch(() => undefined);
        await deleteKey(tmpKey).catch(() => undefined);
        throw err;
      }
    },

    open(sha256: string, range?: { start: number; end: number }): Readable {
      const out = new PassThrough({ highWaterMark: READ_CHUNK_BYTES });
      const key = keyOf(sha256);
      client
        .send(new GetObjectCommand({ Bucket: bucket, Key: key, ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}) }))
        .then((answer) => pipeline(answer.Body as Readable, out))
        .catch((err: unknown) => out.destroy(err instanceof Error ? err : new Error(String(err))));
      return out;
    },

    async stat(sha256: string) {
      try {
        const head = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: keyOf(sha256) }));
        return { sizeBytes: head.ContentLength ?? 0, ...(head.LastModified ? { modifiedAt: head.LastModified } : {}) };
      } catch (err) {
        if (isNotFound(err)) return null;
        throw err;
      }
    },

    async delete(sha256: string) {
      await deleteKey(keyOf(sha256));
    },

    async presign(sha256: string, { filename, ttlSeconds, now = Date.now() }: { filename: string; ttlSeconds: number; now?: number }) {
      const signedAt = Math.floor(now / 1000) * 1000;
      const command = new GetObjectCommand({ Bucket: bucket, Key: keyOf(sha256), ResponseContentDisposition: `attachment; filename="${filename}"` });
      const url = await getSignedUrl(client, command, { expiresIn: ttlSeconds, signingDate: new Date(signedAt) });
      return { url, expiresAt: new Date(signedAt + ttlSeconds * 1000) };
    },
  };
}
