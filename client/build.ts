/**
 * `npm run build -w client`: the installable form of the package in `dist/`.
 * - `dist/gf.js` (the `gf` command) and `dist/index.js` (the SDK) as ES modules for Node 20.11,
 *   with `@gpufarm/shared` and every other import that is not one of the package's
 *   `dependencies` bundled in; the shared code sits in `dist/chunks/`, split so that
 *   `gf --version` loads the command tree only.
 * - `dist/index.d.ts`: the SDK's declarations in one file, the `@gpufarm/shared` types they use
 *   copied in, so a consumer needs nothing that is not on npm.
 * `npm pack` runs it (prepack).
 */
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Extractor, ExtractorConfig } from '@microsoft/api-extractor';
import { bundleNodePackage } from '../shared/build/node-package.js';

const CLIENT = dirname(fileURLToPath(import.meta.url));

await bundleNodePackage({ packageDir: CLIENT, entryPoints: { index: 'src/index.ts', gf: 'src/cli/main.ts' }, commands: ['gf'], splitting: true });

// The declarations tsc emits for the project (client/.tsbuild, shared/.tsbuild), rolled into one file.
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
// Progress and findings go to stderr: `npm pack --json` prints its report on stdout after this runs.
execFileSync(process.execPath, [tsc, '-b', CLIENT], { stdio: ['ignore', 2, 2] });
const extracted = Extractor.invoke(ExtractorConfig.loadFileAndPrepare(join(CLIENT, 'api-extractor.json')), {
  localBuild: true,
  messageCallback: (message) => {
    message.handled = true;
    if (message.logLevel === 'error' || message.logLevel === 'warning') console.error(message.formatMessageWithLocation(CLIENT));
  },
});
if (!extracted.succeeded) throw new Error(`api-extractor: ${extracted.errorCount} errors, ${extracted.warningCount} warnings`);
