/** The container runtime (`@gpufarm/agent/runtime`), for the runtime benchmarks. */
export * from './container-config.js';
export * from './docker-runtime.js';
