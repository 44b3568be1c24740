/**
 * The control plane's test and demo kit (`@gpufarm/control-plane/testing`): factories that insert
 * real rows, the simulated fleet of local runs and benchmarks, and starters for anvil and s3rver.
 * Production code never imports it (the architecture test says so), so the bundle in `dist/`
 * leaves it out.
 */
export * from './anvil.js';
export * from './factories.js';
export * from './job-factories.js';
export * from './s3rver.js';
export * from './seed.js';
export * from './redis-server.js';
