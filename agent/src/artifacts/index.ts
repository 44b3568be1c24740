/** Packing and uploading outputs (`@gpufarm/agent/artifacts`), as the control plane's tests and the benchmarks drive them. */
export * from './off-thread.js';
export * from './pack.js';
export * from './upload.js';
