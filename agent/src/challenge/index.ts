export * from './challenge.js';
export * from './container-challenge.js';
export * from './cpu-challenge.js';
export * from './gpu-bench-challenge.js';
export * from './gpu-bench-session.js';
