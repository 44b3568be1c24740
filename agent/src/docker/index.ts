/** The Engine adapter's pieces other packages use (`@gpufarm/agent/docker`): the container labels and exec. */
export * from './exec.js';
export * from './labels.js';
