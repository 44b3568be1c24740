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
import { chmodSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Extractor, ExtractorConfig } from '@microsoft/api-extractor';
import { build } from 'esbuild';
import { z } from 'zod';

const CLIENT = dirname(fileURLToPath(import.meta.url));
const DIST = join(CLIENT, 'dist');

const manifestSchema = z.object({ dependencies: z.record(z.string(), z.string()).default({}) });
const manifest = manifestSchema.parse(JSON.parse(readFileSync(join(CLIENT, 'package.json'), 'utf8')));

rmSync(DIST, { recursive: true, force: true });

await build({
  entryPoints: { index: join(CLIENT, 'src/index.ts'), gf: join(CLIENT, 'src/cli/main.ts') },
  outdir: DIST,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20.11',
  chunkNames: 'chunks/[name]-[hash]',
  // npm installs the dependencies beside the package; a subpath import (`viem/accounts`) is theirs too.
  external: Object.keys(manifest.dependencies).flatMap((name) => [name, `${name}/*`]),
  conditions: ['@gpufarm/source'],
  // Bundled CommonJS (commander) calls require(); an ES module has none of its own.
  banner: { js: "import { createRequire as __gfCreateRequire } from 'node:module'; const require = __gfCreateRequire(import.meta.url);" },
  logLevel: 'warning',
});
chmodSync(join(DIST, 'gf.js'), 0o755);

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
