export * from './errors.js';
export * from './catalog/gpu-classes.js';
export * from './catalog/regions.js';
export * from './constants.js';
export * from './money.js';
export * from './schemas/index.js';
export * from './protocol/index.js';
export * from './contracts/escrow.generated.js';
