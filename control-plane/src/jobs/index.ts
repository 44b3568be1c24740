/** Jobs as tests drive them (`@gpufarm/control-plane/jobs`). */
export * from './expiry.js';
