export * from './config.js';
export * from './state.js';
