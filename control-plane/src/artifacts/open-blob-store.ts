import type { ExecutionConfig } from '../config.js';
import type { BlobStore } from './blob-store.js';
import { createFsBlobStore } from './fs-blob-store.js';
import { createS3BlobStore, createS3Client } from './s3-blob-store.js';

/** The configured artifact store: the S3 bucket when `s3` is set, else the filesystem folder. `close` frees its connections. */
export function openBlobStore(config: Pick<ExecutionConfig, 'artifactDir' | 's3'>): { blobs: BlobStore; close(): void } {
  if (!config.s3) return { blobs: createFsBlobStore(config.artifactDir), close: () => undefined };
  const client = createS3Client(config.s3);
  const presigner = createS3Client(config.s3, { presigning: true });
  return {
    blobs: createS3BlobStore(client, config.s3.bucket, presigner),
    close: () => {
      client.destroy();
      presigner.destroy();
    },
  };
}
