/**
 * `npm run build -w control-plane`: `dist/main.js`, the control plane run by plain `node`
 * (`node dist/main.js` serves, `node dist/main.js migrate` applies the migrations), an ES module
 * for Node 20.11 with `@gpufarm/shared` bundled in and every package of `dependencies` left to
 * npm. Not split: `import.meta.url` is `dist/main.js`, one level below the package like
 * `src/package-files.ts`, so `migrations/` and `assets/` are found beside `dist/` either way.
 * `tsx control-plane/build.ts OUT_DIR` writes `OUT_DIR/main.js` instead and leaves `dist/` to
 * whoever runs it meanwhile (the image build).
 */
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleNodePackage } from '@gpufarm/shared/build/node-package';

await bundleNodePackage({
  packageDir: dirname(fileURLToPath(import.meta.url)),
  entryPoints: { main: 'src/main.ts' },
  commands: ['main'],
  splitting: false,
  ...(process.argv[2] === undefined ? {} : { outDir: resolve(process.argv[2]) }),
});
