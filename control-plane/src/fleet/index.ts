/** The fleet as scripts and tests use it (`@gpufarm/control-plane/fleet`). */
export * from './store.js';
export * from './gpu-health.js';
