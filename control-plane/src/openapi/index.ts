/** The OpenAPI document (`@gpufarm/control-plane/openapi`), for the docs generator. */
export * from './document.js';
