/**
 * `npm run build -w agent`: the installable form of the agent in `dist/`.
 * - `dist/gf-agent.js` (the `gf-agent` command), `dist/pack-worker.js` (the artifact packer's
 *   worker thread, which the command starts from the file beside it) and `dist/pack-child.js`
 *   (the packer's child process that reads a job's files as the job's user, started likewise)
 *   as ES modules for Node
 *   20.11, with `@gpufarm/shared` and every import that is not one of the package's
 *   `dependencies` bundled in. Not split: each file is whole, so `import.meta.url` in the
 *   command is `dist/gf-agent.js` wherever the code came from.
 * `npm pack` runs it (prepack); scripts/build-agent-deb.sh packs the same tarball.
 */
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleNodePackage } from '../shared/build/node-package.js';

await bundleNodePackage({
  packageDir: dirname(fileURLToPath(import.meta.url)),
  entryPoints: { 'gf-agent': 'src/main.ts', 'pack-worker': 'src/artifacts/pack-worker.ts', 'pack-child': 'src/artifacts/pack-child.ts' },
  commands: ['gf-agent'],
  splitting: false,
});
