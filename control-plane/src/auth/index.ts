/** Accounts and credentials as scripts and tests use them (`@gpufarm/control-plane/auth`). */
export * from './store.js';
export * from './api-keys.js';
export * from './session-store.js';
export * from './machine-tokens.js';
