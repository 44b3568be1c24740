import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import react from '@vitejs/plugin-react';
import { defineConfig, type Plugin } from 'vite';
import { z } from 'zod';

/**
 * Where `npm run dev -w web` sends API calls: `GF_ENDPOINT` as `gf` reads it (an empty one is
 * unset), else a control plane started with `npm start`.
 */
const apiUrl = z.object({ GF_ENDPOINT: z.url().optional() }).parse({ GF_ENDPOINT: process.env.GF_ENDPOINT || undefined }).GF_ENDPOINT ?? 'http://127.0.0.1:8080';

/** `zod` with jitless parsing set before any schema exists (see the file). */
const ZOD_JITLESS = fileURLToPath(new URL('./src/lib/zod-jitless.ts', import.meta.url));

/** The budget for the dashboard's first load: the JS and CSS index.html loads, gzipped. */
const FIRST_LOAD_BUDGET_BYTES = 250 * 1024;

/**
 * After a build: sums the gzip size of every script, module preload and stylesheet index.html
 * loads, prints it, fails the build over budget, and fails it when index.html carries an inline
 * script or style (the Content-Security-Policy would block it).
 */
function firstLoadBudget(): Plugin {
  let outDir = 'dist';
  return {
    name: 'gpufarm-first-load-budget',
    apply: 'build',
    configResolved(config) {
      outDir = config.build.outDir;
    },
    closeBundle() {
      const html = readFileSync(join(outDir, 'index.html'), 'utf8');
      if (/<script(?![^>]*\bsrc=)[^>]*>/.test(html) || /<style[\s>]/.test(html) || /\sstyle=/.test(html)) {
        throw new Error('dist/index.html has an inline script or style: the dashboard CSP (script-src/style-src self) would block it');
      }
      const assets = [...html.matchAll(/(?:src|href)="\/dashboard\/(assets\/[^"]+\.(?:js|css))"/g)].map((m) => m[1]!);
      const sizes = assets.map((asset) => ({ asset, gzip: gzipSync(readFileSync(join(outDir, asset))).length }));
      const total = sizes.reduce((sum, s) => sum + s.gzip, 0);
      for (const s of sizes) console.log(`  first load: ${s.asset} ${(s.gzip / 1024).toFixed(1)} KB gzip`);
      console.log(`first load (JS + CSS, gzip): ${(total / 1024).toFixed(1)} KB of ${FIRST_LOAD_BUDGET_BYTES / 1024} KB`);
      if (total > FIRST_LOAD_BUDGET_BYTES) throw new Error(`the first load is ${(total / 1024).toFixed(1)} KB gzip, over the ${FIRST_LOAD_BUDGET_BYTES / 1024} KB budget: lazy-load heavy pages or narrow imports`);
    },
  };
}

export default defineConfig({
  base: '/dashboard/',
  plugins: [react(), firstLoadBudget()],
  resolve: {
    // `@gpufarm/shared` and `@gpufarm/client/browser` from their TypeScript sources, as tsc sees them
    // (the root of `@gpufarm/shared` is browser-safe; its Node code is `@gpufarm/shared/node`).
    conditions: ['@gpufarm/source', 'browser', 'module', 'import', 'default'],
    // tap's reporter keeps React 18 at the root of node_modules; the app and its React libraries use this workspace's React 19.
    dedupe: ['react', 'react-dom'],
    alias: [
      { find: /^zod$/, replacement: ZOD_JITLESS },
    ],
  },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // The Content-Security-Policy allows no inline script: every asset is a file.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
  },
  server: {
    proxy: {
      '/dashboard/api': { target: apiUrl, changeOrigin: false },
      '/operator/api': { target: apiUrl, changeOrigin: false },
      '/admin/api': { target: apiUrl, changeOrigin: false },
      '/v1': { target: apiUrl, changeOrigin: false },
    },
  },
});
