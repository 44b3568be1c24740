/** The customer client library (the gf CLI lands here later). */
export * from './http.js';
