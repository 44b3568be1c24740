/** Farms as scripts use them (`@gpufarm/control-plane/farms`). */
export * from './enrollment-tokens.js';
