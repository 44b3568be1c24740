import { config } from 'zod/v4';

// The CSP has no 'unsafe-eval': zod must not compile parsers with `new Function`, nor probe
// whether it may. vite.config.ts resolves every `import … from 'zod'` (the app's and
// `@gpufarm/shared`'s) to this module, so the setting holds before any schema is built,
// whatever chunk a schema lands in.
config({ jitless: true });

export * from 'zod/v4';
export { default } from 'zod/v4';
