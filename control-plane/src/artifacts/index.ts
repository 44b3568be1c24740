/** The artifact blob stores (`@gpufarm/control-plane/artifacts`). */
export * from './fs-blob-store.js';
export * from './s3-blob-store.js';
