export * from './gpu-bench-image.js';
export * from './gpu-container.js';
export * from './host-checks.js';
export * from './run.js';
export * from './tiers.js';
