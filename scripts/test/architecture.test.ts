import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { z } from 'zod';
import { listSources, moduleImports, type SourceFile } from '@gpufarm/shared/testing/import-graph';

/**
 * The repository's package boundaries, read from every workspace's source: a package reaches
 * another only through that package's name and one of the entries its `exports` names
 * (`@gpufarm/control-plane/db`, `@gpufarm/agent`), never by a relative path out of its own
 * folder, and never through a subpath the other does not export (Node refuses those at run time;
 * this says which line). Each package's own layering is its `test/architecture.test.ts`.
 */

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** Folders that hold no source of ours (.gitignore's): dependencies, build, type-check and test output. */
const SKIPPED = new Set(['node_modules', 'dist', 'dist-test', 'test-output']);
const SOURCE = /\.(ts|tsx|mts|js|mjs)$/;

const manifestSchema = z.object({
  name: z.string(),
  exports: z.union([z.string(), z.record(z.string(), z.unknown())]).optional(),
  dependencies: z.record(z.string(), z.string()).optional(),
  devDependencies: z.record(z.string(), z.string()).optional(),
});

export interface Workspace {
  /** The folder, relative to the repository root (`control-plane`). */
  dir: string;
  name: string;
  /** The subpaths `exports` names (`.`, `./db`); null when the package has no `exports`. */
  entries: string[] | null;
  /** The packages its package.json declares (dependencies and devDependencies). */
  declared: string[];
}

/** The workspaces the root package.json lists, each with the entries its own package.json exports. */
export function workspaces(root: string): Workspace[] {
  const listed = z.object({ workspaces: z.array(z.string()) }).parse(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))).workspaces;
  return listed.map((dir) => {
    const manifest = manifestSchema.parse(JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8')));
    const entries = manifest.exports === undefined ? null : typeof manifest.exports === 'string' ? ['.'] : Object.keys(manifest.exports);
    return { dir, name: manifest.name, entries, declared: Object.keys({ ...manifest.dependencies, ...manifest.devDependencies }) };
  });
}

/** Every source file under `dir` (relative to `root`), outside dependencies and build output; paths relative to `root`. */
export function sources(root: string, dir: string): SourceFile[] {
  return listSources(join(root, dir), {
    isSource: (name) => SOURCE.test(name) && !name.endsWith('.d.ts'),
    skip: (name) => SKIPPED.has(name) || name.startsWith('.'),
  }).map((file) => ({ ...file, path: `${dir}/${file.path}` }));
}

/** Whether `subpath` (`./db`) is one of `entries`, a `*` pattern entry included. */
export function exported(entries: readonly string[], subpath: string): boolean {
  return entries.some((entry) => {
    const star = entry.indexOf('*');
    if (star < 0) return entry === subpath;
    return subpath.startsWith(entry.slice(0, star)) && subpath.endsWith(entry.slice(star + 1)) && subpath.length >= entry.length - 1;
  });
}

/**
 * Each import that crosses a package boundary the wrong way, as `file:line: what`: a relative
 * specifier that leaves the importing workspace, or a bare `@scope/name/sub` specifier of a
 * workspace whose `exports` does not name `./sub` (a workspace without `exports` exports nothing),
 * or of a workspace the importing package.json does not declare (npm would not link it for them).
 */
export function boundaryViolations(files: readonly SourceFile[], packages: readonly Workspace[]): string[] {
  const byName = new Map(packages.map((p) => [p.name, p]));
  const found: string[] = [];
  for (const file of files) {
    const own = packages.find((p) => file.path.startsWith(`${p.dir}/`));
    // Only `../` or a package name can reach past the package: most files are skipped unparsed.
    if (own === undefined || !(file.text.includes('../') || file.text.includes('@'))) continue;
    for (const { specifier, line } of moduleImports(file)) {
      const at = `${file.path}:${line}`;
      if (specifier.startsWith('.')) {
        const target = join(dirname(file.path), specifier).split(sep).join('/');
        if (!target.startsWith(`${own.dir}/`)) {
          const into = packages.find((p) => target.startsWith(`${p.dir}/`));
          found.push(`${at}: '${specifier}' leaves ${own.name}${into ? `; import ${into.name} by one of its exports instead` : ''}`);
        }
        continue;
      }
      const parts = specifier.split('/');
      const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
      const target = byName.get(name);
      if (target === undefined) continue;
      if (name !== own.name && !own.declared.includes(name)) found.push(`${at}: '${specifier}': ${own.dir}/package.json does not declare ${name}`);
      const subpath = specifier === name ? '.' : `./${specifier.slice(name.length + 1)}`;
      if (target.entries === null || !exported(target.entries, subpath)) {
        found.push(`${at}: '${specifier}' is not an entry of ${name} (exports: ${target.entries?.join(', ') ?? 'none'})`);
      }
    }
  }
  return found;
}

const packages = workspaces(ROOT);
const files = packages.flatMap((p) => (existsSync(join(ROOT, p.dir)) ? sources(ROOT, p.dir) : []));

t.test('default: every workspace was read', async (t) => {
  t.ok(packages.length >= 6, `${packages.length} workspaces: ${packages.map((p) => p.dir).join(', ')}`);
  t.ok(files.length > 500, `${files.length} source files`);
  for (const name of ['@gpufarm/control-plane', '@gpufarm/agent']) {
    const entries = packages.find((p) => p.name === name)?.entries;
    t.ok(entries !== undefined && entries !== null && entries.every((e) => !e.includes('*')), `${name} exports named entries only: ${entries?.join(', ')}`);
  }
});

t.test('behavior: no relative import leaves its package; each package imported is declared and names an entry it exports', async (t) => {
  t.same(boundaryViolations(files, packages), [], 'each one is listed as file:line');
});

t.test('args: the check sees a relative import out of a package, an unexported subpath and an undeclared package', async (t) => {
  const sample: Workspace[] = [
    { dir: 'a', name: '@x/a', entries: ['.', './db', './helpers/*.js'], declared: [] },
    { dir: 'b', name: '@x/b', entries: null, declared: [] },
    { dir: 'c', name: '@x/c', entries: ['.'], declared: ['@x/a', 'zod'] },
  ];
  const planted: SourceFile[] = [
    { path: 'c/src/one.ts', text: "import { db } from '@x/a/db';\nimport { pool } from '../../a/src/db/pool.js';\n" },
    { path: 'c/test/two.test.ts', text: "import { a } from '@x/a';\nimport { deep } from '@x/a/src/deep.js';\nconst b = await import('@x/b/x.js');\n" },
    { path: 'c/test/three.test.ts', text: "import { h } from '@x/a/helpers/h.js';\nimport { one } from '../src/one.js';\nimport { z } from 'zod';\nimport { q } from '../../outside.js';\n" },
  ];
  t.same(boundaryViolations(planted, sample), [
    "c/src/one.ts:2: '../../a/src/db/pool.js' leaves @x/c; import @x/a by one of its exports instead",
    "c/test/two.test.ts:2: '@x/a/src/deep.js' is not an entry of @x/a (exports: ., ./db, ./helpers/*.js)",
    "c/test/two.test.ts:3: '@x/b/x.js': c/package.json does not declare @x/b",
    "c/test/two.test.ts:3: '@x/b/x.js' is not an entry of @x/b (exports: none)",
    "c/test/three.test.ts:4: '../../outside.js' leaves @x/c",
  ]);
  t.ok(exported(['./*.js'], './x/y.js'), 'a pattern entry matches what it covers');
  t.notOk(exported(['./*.js'], './x.ts'), 'and nothing else');
});

t.test('args: the sources skip dependencies and build output', async (t) => {
  t.notOk(files.some((f) => f.path.split('/').some((part) => SKIPPED.has(part))), 'no file under node_modules, dist or .tsbuild');
  t.ok(files.some((f) => f.path === relative(ROOT, fileURLToPath(import.meta.url)).split(sep).join('/')), 'this file is among them');
});
