import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { bundleNodePackage } from './node-package.js';

/**
 * The agent and the control plane as the tests start them: bundled once per test run by
 * scripts/run-tests.sh into `dist-test/` of each package (the same esbuild build as their
 * `dist/`, which stays theirs), since a start through tsx costs several times the CPU of a bundle
 * and the suite starts them hundreds of times. Each folder sits one level below its package, as
 * `src/` and `dist/` do, so the files found from `import.meta.url` (migrations, assets, README,
 * the packer's worker and child, gpu-bench) are the same. A bundle older than its sources is not
 * used: the command falls back to tsx on the sources, so a test run without run-tests.sh is
 * slower, never stale.
 */

const ROOT = resolve(import.meta.dirname, '../..');

interface TestBundle {
  packageDir: string;
  entryPoints: Record<string, string>;
  command: string;
  /** The command through tsx, for a missing or stale bundle. */
  fromSource: string[];
}

const BUNDLES = {
  agent: {
    packageDir: join(ROOT, 'agent'),
    entryPoints: { 'gf-agent': 'src/main.ts', 'pack-worker': 'src/artifacts/pack-worker.ts', 'pack-child': 'src/artifacts/pack-child.ts' },
    command: 'gf-agent',
    fromSource: [join(ROOT, 'agent/bin/gf-agent.js')],
  },
  'control-plane': {
    packageDir: join(ROOT, 'control-plane'),
    entryPoints: { main: 'src/main.ts' },
    command: 'main',
    fromSource: ['--import', 'tsx', join(ROOT, 'control-plane/src/main.ts')],
  },
} satisfies Record<string, TestBundle>;

export type TestBundleName = keyof typeof BUNDLES;

const STAMP = 'sources.sha256';

function outDir(bundle: TestBundle): string {
  return join(bundle.packageDir, 'dist-test');
}

/** Every file that goes into a bundle, by path, size and mtime: what a rebuild would read. */
function sourcesFingerprint(bundle: TestBundle): string {
  const hash = createHash('sha256');
  const visit = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) visit(path);
      else if (entry.isFile()) {
        const s = statSync(path);
        hash.update(`${relative(ROOT, path)}\0${s.size}\0${s.mtimeMs}\n`);
      }
    }
  };
  for (const dir of [join(bundle.packageDir, 'src'), join(ROOT, 'shared/src')]) visit(dir);
  hash.update(readFileSync(join(bundle.packageDir, 'package.json')));
  return hash.digest('hex');
}

function isFresh(bundle: TestBundle): boolean {
  const stamp = join(outDir(bundle), STAMP);
  return existsSync(stamp) && readFileSync(stamp, 'utf8') === sourcesFingerprint(bundle);
}

/** Builds both bundles (scripts/run-tests.sh, before tap starts); an up-to-date one is kept. */
export async function buildTestBundles(): Promise<void> {
  for (const bundle of Object.values(BUNDLES) as TestBundle[]) {
    if (isFresh(bundle)) continue;
    const fingerprint = sourcesFingerprint(bundle);
    const dir = await bundleNodePackage({ packageDir: bundle.packageDir, entryPoints: bundle.entryPoints, commands: [bundle.command], splitting: false, outDir: outDir(bundle) });
    // The agent finds gpu-bench beside its command once packaged; in the repository,
    // scripts/build-images.sh builds it here.
    if (bundle === BUNDLES.agent) symlinkSync(join(ROOT, '.gpufarm/gpu-bench/rootfs'), join(dir, 'gpu-bench'));
    writeFileSync(join(dir, STAMP), fingerprint);
  }
}

// Decided once per test process: the sources do not change under a running test.
const commands = new Map<TestBundleName, [node: string, ...args: string[]]>();

/** `[node, …arguments]` that starts `name`: its bundle when fresh, else its sources through tsx. */
export function testCommand(name: TestBundleName): [node: string, ...args: string[]] {
  let command = commands.get(name);
  if (!command) {
    const bundle: TestBundle = BUNDLES[name];
    command = isFresh(bundle) ? [process.execPath, join(outDir(bundle), `${bundle.command}.js`)] : [process.execPath, ...bundle.fromSource];
    commands.set(name, command);
  }
  return command;
}
