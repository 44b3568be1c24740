import { chmodSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';
import { z } from 'zod';

/** One workspace package's installable build (`npm run build -w client`, `-w agent`, `-w control-plane`). */
export interface NodePackageBuild {
  /** The package's folder (its package.json names the `dependencies` left to npm). */
  packageDir: string;
  /** Output name (without `.js`) → source file, relative to `packageDir`. */
  entryPoints: Record<string, string>;
  /** Entries that are commands (`bin`): their sources start with `#!/usr/bin/env node`; made executable. */
  commands: string[];
  /** Shared code in `dist/chunks/` (lazily loaded parts stay out of a command's start); off: each entry is self-contained. */
  splitting: boolean;
  /** Where the build goes; default `<packageDir>/dist`. Another folder leaves the package's `dist` alone for whoever runs it. */
  outDir?: string;
}

const manifestSchema = z.object({ dependencies: z.record(z.string(), z.string()).default({}) });

/**
 * Bundles a package into `<packageDir>/dist` as ES modules for Node 20.11: `@gpufarm/shared`
 * (never published) and every import that is not one of the package's `dependencies` go inside;
 * the `dependencies` stay imports for npm to install beside the package. Returns the output folder.
 */
export async function bundleNodePackage(o: NodePackageBuild): Promise<string> {
  const dist = o.outDir ?? join(o.packageDir, 'dist');
  const manifest = manifestSchema.parse(JSON.parse(readFileSync(join(o.packageDir, 'package.json'), 'utf8')));
  rmSync(dist, { recursive: true, force: true });
  await build({
    entryPoints: Object.fromEntries(Object.entries(o.entryPoints).map(([name, source]) => [name, join(o.packageDir, source)])),
    outdir: dist,
    bundle: true,
    splitting: o.splitting,
    format: 'esm',
    platform: 'node',
    target: 'node20.11',
    chunkNames: 'chunks/[name]-[hash]',
    // A subpath import (`viem/accounts`) belongs to its package too.
    external: Object.keys(manifest.dependencies)
      .filter((name) => name !== '@gpufarm/shared')
      .flatMap((name) => [name, `${name}/*`]),
    conditions: ['@gpufarm/source'],
    // Bundled CommonJS (commander, ws) calls require(); an ES module has none of its own.
    banner: { js: "import { createRequire as __gfCreateRequire } from 'node:module'; const require = __gfCreateRequire(import.meta.url);" },
    logLevel: 'warning',
  });
  for (const command of o.commands) {
    const file = join(dist, `${command}.js`);
    if (!readFileSync(file, 'utf8').startsWith('#!/usr/bin/env node\n')) throw new Error(`${file}: the command's source must start with #!/usr/bin/env node`);
    chmodSync(file, 0o755);
  }
  return dist;
}
