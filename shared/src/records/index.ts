export * from './canonical-json.js';
export * from './execution-record.js';
export * from './canary.js';
