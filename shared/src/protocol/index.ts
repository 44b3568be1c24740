export * from './assignment.js';
export * from './agent-messages.js';
export * from './artifact-upload.js';
export * from './image-cache.js';
export * from './machine-api.js';
