export * from './assignment.js';
export * from './agent-messages.js';
