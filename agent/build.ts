/**
 * `npm run build -w agent`: the installable form of the agent in `dist/`.
 * - `dist/gf-agent.js` (the `gf-agent` command), `dist/pack-worker.js` (the artifact packer's
 *   worker thread, which the command starts from the file beside it) and `dist/pack-child.js`
 *   (the packer's child process that reads a job's files as the job's user, started likewise)
 *   as ES modules for Node
 *   20.11, with `@gpufarm/shared` and every import that is not one of the package's
 *   `dependencies` bundled in. Not split: each file is whole, so `import.meta.url` in the
 *   command is `dist/gf-agent.js` wherever the code came from.
 * - `dist/gpu-bench/`: the GPU benchmark program and the glibc pieces it loads
 *   (scripts/build-gpu-bench.sh, cached by its sources), from which the agent makes the
 *   benchmark image on the farm (src/benchmark/gpu-bench-image.ts).
 * `npm pack` runs it (prepack); scripts/build-agent-deb.sh packs the same tarball.
 */
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleNodePackage } from '@gpufarm/shared/build/node-package';

const packageDir = dirname(fileURLToPath(import.meta.url));
const dist = await bundleNodePackage({
  packageDir,
  entryPoints: { 'gf-agent': 'src/main.ts', 'pack-worker': 'src/artifacts/pack-worker.ts', 'pack-child': 'src/artifacts/pack-child.ts' },
  commands: ['gf-agent'],
  splitting: false,
});
execFileSync('bash', [join(packageDir, '../scripts/build-gpu-bench.sh'), '--rootfs', join(dist, 'gpu-bench')], { stdio: ['ignore', 'ignore', 'inherit'] });
