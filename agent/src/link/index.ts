export * from './agent-link.js';
export * from './assignment-runner.js';
export * from './backoff.js';
