export * from './outbox.js';
export * from './shipper.js';
