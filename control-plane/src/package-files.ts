import { fileURLToPath } from 'node:url';

/**
 * Files the control plane reads at run time, found from the package's folder. This module is
 * `src/package-files.ts` under tsx and inside `dist/main.js` once built: one level below the
 * package either way, so the same relative URL names the same folder.
 */
const PACKAGE_ROOT = new URL('../', import.meta.url);

/** `migrations/`: the schema's SQL files, applied in order by `migrate`. */
export const MIGRATIONS_DIR = fileURLToPath(new URL('migrations/', PACKAGE_ROOT));
/** `assets/`: static files the HTTP app serves (the reference page's stylesheet). */
export const ASSETS_DIR = fileURLToPath(new URL('assets/', PACKAGE_ROOT));
/** `web/dist`: the dashboard as `npm run build -w web` builds it, beside this package in the repository. */
export const WEB_DIST_DIR = fileURLToPath(new URL('../web/dist/', PACKAGE_ROOT));
