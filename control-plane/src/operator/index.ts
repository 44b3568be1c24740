/** Operator views as tests read them (`@gpufarm/control-plane/operator`). */
export * from './store.js';
export * from './views.js';
