import { randomUUID } from 'node:crypto';
import { PassThrough, Writable, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  S3Client,
  S3ServiceException,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { S3StoreConfig } from '../config.js';
import { BlobTooLargeError, checkReadable, DirectUploadMismatchError, hashingLimit, planParts, type BlobStore, type DirectUploads } from './blob-store.js';

const SHA256 = /^[0-9a-f]{64}$/;
/** Multipart part size: S3's minimum, so an upload holds at most `UPLOAD_QUEUE` of these in memory. */
const PART_BYTES = 5 * 1024 * 1024;
const UPLOAD_QUEUE = 2;
/** Buffer of a download stream, as the filesystem store reads. */
const READ_CHUNK_BYTES = 1024 * 1024;

/** Key prefixes in the bucket: content-addressed blobs, and uploads whose hash is not known yet. */
export const S3_BLOB_PREFIX = 'blobs/';
export const S3_TMP_PREFIX = 'tmp/';

/**
 * The origin presigned URLs of `config`'s bucket point to (a browser following a download's
 * redirect fetches from it): the endpoint's with path-style, the bucket's own host otherwise.
 */
export function s3PublicOrigin(config: S3StoreConfig): string {
  if (!config.endpoint) return `https://${config.bucket}.s3.${config.region}.amazonaws.com`;
  const endpoint = new URL(config.endpoint);
  return config.forcePathStyle ? endpoint.origin : `${endpoint.protocol}//${config.bucket}.${endpoint.host}`;
}

/**
 * The SDK client for `config`: path-style for self-hosted servers, static credentials when given.
 * `presigning`: for presigned part URLs, with request checksums only where S3 requires them, else
 * the SDK signs the CRC32 of the empty body it presigns into the URL and S3 refuses every part.
 */
export function createS3Client(config: S3StoreConfig, options: { presigning?: boolean } = {}): S3Client {
  return new S3Client({
    ...(options.presigning ? { requestChecksumCalculation: 'WHEN_REQUIRED' as const } : {}),
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
 * Direct uploads (`direct`): a multipart upload begun at `tmp/<uuid>` whose parts the sender PUTs
 * to URLs presigned with `presigner` (`createS3Client(config, { presigning: true })`); its
 * completion reads the object back, hashing it, before it is copied to its content key.
 *
 * @example
 *   const blobs = createS3BlobStore(createS3Client(config.execution.s3), config.execution.s3.bucket);
 */
export function createS3BlobStore(client: S3Client, bucket: string, presigner: S3Client = client): BlobStore & { keyOf(sha256: string): string } {
  const keyOf = (sha256: string) => {
    if (!SHA256.test(sha256)) throw new Error(`not a sha256: ${JSON.stringify(sha256)}`);
    return `${S3_BLOB_PREFIX}${sha256}`;
  };
  const deleteKey = (key: string) => client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
  /** Moves a verified temp object to its content key. */
  const adopt = async (tmpKey: string, sha256: string) => {
    await client.send(new CopyObjectCommand({ Bucket: bucket, Key: keyOf(sha256), CopySource: `${bucket}/${tmpKey}`, MetadataDirective: 'REPLACE', ContentType: 'application/octet-stream' }));
    await deleteKey(tmpKey);
  };

  const direct: DirectUploads = {
    async begin({ maxBytes, ttlSeconds, now = Date.now() }) {
      const key = `${S3_TMP_PREFIX}${randomUUID()}`;
      const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ContentType: 'application/octet-stream' }));
      if (!UploadId) throw new Error('the store began a multipart upload without an upload id');
      const { partBytes, partCount } = planParts(maxBytes);
      const signedAt = Math.floor(now / 1000) * 1000;
      const partUrls: string[] = [];
      for (let partNumber = 1; partNumber <= partCount; partNumber++) {
        const command = new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: partNumber });
        partUrls.push(await getSignedUrl(presigner, command, { expiresIn: ttlSeconds, signingDate: new Date(signedAt) }));
      }
      return { key, storeUploadId: UploadId, partBytes, partUrls, expiresAt: new Date(signedAt + ttlSeconds * 1000) };
    },

    async finish(upload, { parts, maxBytes, expected }) {
      try {
        await client.send(
          new CompleteMultipartUploadCommand({
            Bucket: bucket,
            Key: upload.key,
            UploadId: upload.storeUploadId,
            MultipartUpload: { Parts: parts.map((p) => ({ PartNumber: p.partNumber, ETag: p.etag })) },
          }),
        );
        // The size first, from the object's metadata: an oversized object is not read at all.
        const head = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: upload.key }));
        const size = head.ContentLength ?? 0;
        if (size > maxBytes) throw new BlobTooLargeError(maxBytes);
        if (size !== expected.sizeBytes) throw new DirectUploadMismatchError({ sha256: null, sizeBytes: size }, expected);
        // The check by a party other than the sender: the whole object read back and hashed.
        const counted = hashingLimit(maxBytes);
        const answer = await client.send(new GetObjectCommand({ Bucket: bucket, Key: upload.key }));
        await pipeline(answer.Body as Readable, counted.stream, new Writable({ write: (_chunk, _encoding, done) => done() }));
        const stored = { sha256: counted.sha256(), sizeBytes: counted.sizeBytes() };
        if (stored.sha256 !== expected.sha256 || stored.sizeBytes !== expected.sizeBytes) throw new DirectUploadMismatchError(stored, expected);
        await adopt(upload.key, stored.sha256);
        return stored;
      } catch (err) {
        await direct.abort(upload);
        throw err;
      }
    },

    async abort(upload) {
      // Either step may find nothing: the upload was completed (or never made), the object not made.
      await client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: upload.key, UploadId: upload.storeUploadId })).catch(() => undefined);
      await deleteKey(upload.key).catch(() => undefined);
    },
  };

  return {
    keyOf,
    direct,

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
        await adopt(tmpKey, sha256);
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
