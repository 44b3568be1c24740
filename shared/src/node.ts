/**
 * `@gpufarm/shared/node`: the shared code that needs Node (`node:crypto`, `node:net`, `node:http`,
 * child processes, `Buffer`, `process`), for the control plane, the agent, the client, scripts and
 * tests. The browser-safe contract is the package's root (`index.ts`); this entry does not repeat it.
 */
export * from './net/public-name.js';
export * from './net/free-port.js';
export * from './net/metrics-listener.js';
export * from './records/execution-record.js';
export * from './records/canary.js';
export * from './proof/gpu-challenge.js';
export * from './process/line-tail.js';
export * from './process/environment.js';
export * from './process/owned-child.js';
