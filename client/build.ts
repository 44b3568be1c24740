/**
 * `npm run build -w client`: the installable form of the package in `dist/`.
 * - `dist/gf.js` (the `gf` command) and `dist/index.js` (the SDK) as ES modules for Node 20.11,
 *   with `@gpufarm/shared` and every other import that is not one of the package's
 *   `dependencies` bundled in; the shared code sits in `dist/chunks/`, split so that
 *   `gf --version` loads the command tree only.
 * - `dist/browser.js` (`@gpufarm/client/browser`, the SDK without Node) as one ES module for
 *   browsers and bundlers, `@gpufarm/shared` bundled in and nothing of Node left.
 * - `dist/index.d.ts` and `dist/browser.d.ts`: the SDK's declarations in one file each, the
 *   `@gpufarm/shared` types they use copied in, so a consumer needs nothing that is not on npm.
 * `npm pack` runs it (prepack).
 */
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Extractor, ExtractorConfig, type IConfigFile } from '@microsoft/api-extractor';
import { build } from 'esbuild';
import { bundleNodePackage } from '@gpufarm/shared/build/node-package';

const CLIENT = dirname(fileURLToPath(import.meta.url));

await bundleNodePackage({ packageDir: CLIENT, entryPoints: { index: 'src/index.ts', gf: 'src/cli/main.ts' }, commands: ['gf'], splitting: true });

// The browser entry: `@gpufarm/shared` is a barrel that also holds Node-only modules (execution
// records, host names); its package.json declares it free of side effects, so the bundle keeps
// only what the SDK uses and no `node:` import survives (checked below).
const browserBundle = join(CLIENT, 'dist/browser.js');
await build({
  entryPoints: [join(CLIENT, 'src/browser.ts')],
  outfile: browserBundle,
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  external: ['viem', 'viem/*', 'zod', 'zod/*', 'node:*'],
  conditions: ['@gpufarm/source'],
  logLevel: 'warning',
});
const nodeImport = /from\s*["']node:[a-z/]+["']/.exec(readFileSync(browserBundle, 'utf8'));
if (nodeImport) throw new Error(`dist/browser.js still imports Node (${nodeImport[0]}): keep Node-only code out of what src/browser.ts reaches`);

// The declarations tsc emits for the project (client/.tsbuild, shared/.tsbuild), rolled into one file.
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
// Progress and findings go to stderr: `npm pack --json` prints its report on stdout after this runs.
execFileSync(process.execPath, [tsc, '-b', CLIENT], { stdio: ['ignore', 2, 2] });
for (const entry of ['index', 'browser']) rollUpDeclarations(entry);

/** `dist/<entry>.d.ts` from `.tsbuild/src/<entry>.d.ts`, with the settings of api-extractor.json. */
function rollUpDeclarations(entry: string): void {
  const configFile = join(CLIENT, 'api-extractor.json');
  const config = ExtractorConfig.loadFile(configFile);
  const declarations = `.tsbuild/src/${entry}.d.ts`;
  const configObject: IConfigFile = {
    ...config,
    mainEntryPointFilePath: `<projectFolder>/${declarations}`,
    compiler: { ...config.compiler, overrideTsconfig: { ...(config.compiler?.overrideTsconfig as object), files: [declarations] } },
    dtsRollup: { ...config.dtsRollup, enabled: true, untrimmedFilePath: `<projectFolder>/dist/${entry}.d.ts` },
  };
  const extracted = Extractor.invoke(ExtractorConfig.prepare({ configObject, configObjectFullPath: configFile, packageJsonFullPath: join(CLIENT, 'package.json') }), {
    localBuild: true,
    messageCallback: (message) => {
      message.handled = true;
      if (message.logLevel === 'error' || message.logLevel === 'warning') console.error(message.formatMessageWithLocation(CLIENT));
    },
  });
  if (!extracted.succeeded) throw new Error(`api-extractor (${entry}): ${extracted.errorCount} errors, ${extracted.warningCount} warnings`);
}
