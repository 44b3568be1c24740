/** Job logs as tests use them (`@gpufarm/control-plane/logs`). */
export * from './store.js';
export * from './stream.js';
