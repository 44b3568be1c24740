import type { BlobStore } from '../artifacts/blob-store.js';

/**
 * The same store, reporting the size of every blob it stored (streamed puts and finished direct
 * uploads) to `stored`; reads and deletes pass through.
 */
export function meteredBlobStore(blobs: BlobStore, stored: (bytes: number) => void): BlobStore {
  const direct = blobs.direct;
  return {
    put: async (source, options) => {
      const result = await blobs.put(source, options);
      stored(result.sizeBytes);
      return result;
    },
    open: (sha256, range) => blobs.open(sha256, range),
    stat: (sha256) => blobs.stat(sha256),
    delete: (sha256) => blobs.delete(sha256),
    ...(blobs.presign ? { presign: blobs.presign.bind(blobs) } : {}),
    ...(direct
      ? {
          direct: {
            begin: (options) => direct.begin(options),
            finish: async (upload, options) => {
              const result = await direct.finish(upload, options);
              stored(result.sizeBytes);
              return result;
            },
            abort: (upload) => direct.abort(upload),
          },
        }
      : {}),
  };
}
