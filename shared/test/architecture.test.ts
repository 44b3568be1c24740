import { readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import ts from 'typescript';
import { z } from 'zod';
import { checkImportGraph, fileLoops, folderLoops, importEdges, moduleImports, parse, type ImportEdge, type SourceFile } from './helpers/import-graph.js';

/**
 * `@gpufarm/shared` has two entries (package.json `exports`): the root, which the dashboard
 * bundles and so must run in a browser, and `./node`, the code that needs Node. Read from the
 * source with the TypeScript parser: nothing the root reaches imports a Node builtin or a package
 * outside `BROWSER_PACKAGES`, or names one of Node's globals (a type included: the web app's
 * type check has no Node types); every module is reached from one of the two entries; and no
 * import loop joins two folders of `src/` or two files (`fleet/` sits below `protocol/`).
 */

const PACKAGE = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SRC = join(PACKAGE, 'src');

/** Packages the root may import: they run in a browser. */
const BROWSER_PACKAGES: ReadonlySet<string> = new Set(['zod']);
/** Node's globals; a property of the same name (`options.process`) is not one. */
const NODE_GLOBALS: ReadonlySet<string> = new Set(['Buffer', 'process', 'NodeJS', 'require', 'module', '__dirname', '__filename', 'global']);
const NODE_BUILTINS: ReadonlySet<string> = new Set(builtinModules);

const manifestSchema = z.object({ exports: z.record(z.string(), z.string()) });

/** The files `entry` reaches, each with the file that first imported it (null for the entry). */
function reach(entry: string, edges: readonly ImportEdge[]): Map<string, string | null> {
  const from = new Map<string, string | null>([[entry, null]]);
  const queue = [entry];
  while (queue.length > 0) {
    const file = queue.shift()!;
    for (const edge of edges) {
      if (edge.from !== file || from.has(edge.to)) continue;
      from.set(edge.to, file);
      queue.push(edge.to);
    }
  }
  return from;
}

/** `@scope/name/sub` → `@scope/name`, `name/sub` → `name`. */
function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}

/** Whether `id` is a use of a global by that name rather than a property, key or declaration of one. */
function isGlobalUse(id: ts.Identifier): boolean {
  const parent = id.parent;
  if ((ts.isPropertyAccessExpression(parent) && parent.name === id) || (ts.isQualifiedName(parent) && parent.right === id)) return false;
  if ((ts.isPropertyAssignment(parent) || ts.isPropertySignature(parent) || ts.isPropertyDeclaration(parent) || ts.isMethodDeclaration(parent) || ts.isMethodSignature(parent)) && parent.name === id) return false;
  if ((ts.isParameter(parent) || ts.isVariableDeclaration(parent) || ts.isBindingElement(parent)) && parent.name === id) return false;
  return !(ts.isImportSpecifier(parent) || ts.isExportSpecifier(parent));
}

/**
 * Why the files `entry` reaches would not run in a browser, each as `file:line what (via a -> b)`:
 * an import of a Node builtin (`node:crypto`, `fs`) or of a package outside `BROWSER_PACKAGES`,
 * and each use of one of Node's globals.
 */
function nodeOnlyUses(files: readonly SourceFile[], entry: string): string[] {
  const from = reach(entry, importEdges(files));
  const via = (file: string) => {
    const chain = [file];
    for (let up = from.get(file); up != null; up = from.get(up)) chain.unshift(up);
    return chain.join(' -> ');
  };
  const problems: string[] = [];
  for (const file of files.filter((f) => from.has(f.path))) {
    const source = parse(file);
    // Imports and globals of a file in source order, as one walk would list them.
    const found: Array<{ pos: number; what: string }> = [];
    const add = (pos: number, what: string) => found.push({ pos, what: `${file.path}:${source.getLineAndCharacterOfPosition(pos).line + 1} ${what} (via ${via(file.path)})` });
    for (const { specifier: name, pos } of moduleImports(file, source)) {
      if (name.startsWith('.')) continue;
      if (name.startsWith('node:') || NODE_BUILTINS.has(name)) add(pos, `imports the Node builtin ${name}`);
      else if (!BROWSER_PACKAGES.has(packageOf(name))) add(pos, `imports ${name}, not a package known to run in a browser`);
    }
    const visit = (node: ts.Node) => {
      if (ts.isIdentifier(node) && NODE_GLOBALS.has(node.text) && isGlobalUse(node)) add(node.getStart(), `uses Node's ${node.text}`);
      ts.forEachChild(node, visit);
    };
    visit(source);
    problems.push(...found.sort((a, b) => a.pos - b.pos).map((f) => f.what));
  }
  return problems;
}

const { files, edges } = checkImportGraph(t, SRC);
const manifest = manifestSchema.parse(JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8')));
/** An entry's source file, relative to `src/` (`./src/node.ts` → `node.ts`). */
const entryFile = (subpath: string) => manifest.exports[subpath]?.replace(/^\.\/src\//, '') ?? `(no "${subpath}" in package.json exports)`;

t.test('behavior: the root entry reaches nothing Node-only', async (t) => {
  const root = entryFile('.');
  t.ok(files.some((f) => f.path === root), `the root entry ${root} is a file of src/`);
  t.same(nodeOnlyUses(files, root), [], 'each use is listed with the imports that reach it: move the module to the Node entry (node.ts), or split off its browser-safe part');
});

t.test('behavior: every module is reached from a named entry', async (t) => {
  const subpaths = Object.keys(manifest.exports);
  t.same(subpaths.filter((s) => s.includes('*')), [], 'the exports map names each entry (no wildcard)');
  // Entries outside src/ (build and test helpers for the other workspaces) are not the library.
  const library = subpaths.filter((s) => manifest.exports[s]!.startsWith('./src/'));
  t.same(library.sort(), ['.', './node'], 'the library has two entries: the browser-safe root and ./node');
  const reached = new Set(library.flatMap((s) => [...reach(entryFile(s), edges).keys()]));
  t.same(files.map((f) => f.path).filter((p) => !reached.has(p)), [], 'a module no entry reaches is dead, or missing from index.ts or node.ts');
});

t.test('args: the check sees a planted Node import, package and global', async (t) => {
  const sample: SourceFile[] = [
    { path: 'index.ts', text: "export * from './money.js';\nexport * from './records/hash.js';\n" },
    { path: 'money.ts', text: "import { z } from 'zod';\nexport const cents = z.int();\nexport const options = { process: 1 };\nexport const spawned = options.process;\n" },
    { path: 'records/hash.ts', text: "import { createHash } from 'node:crypto';\nimport type { Readable } from 'stream';\nimport WebSocket from 'ws';\nexport const hash = (s: Readable, w: WebSocket) => createHash('sha256').update(Buffer.from(String(s) + String(w))).digest('hex');\n" },
    { path: 'node.ts', text: "export const env = (from: NodeJS.ProcessEnv = process.env) => from;\n" },
  ];
  t.same(nodeOnlyUses(sample, 'index.ts'), [
    'records/hash.ts:1 imports the Node builtin node:crypto (via index.ts -> records/hash.ts)',
    'records/hash.ts:2 imports the Node builtin stream (via index.ts -> records/hash.ts)',
    'records/hash.ts:3 imports ws, not a package known to run in a browser (via index.ts -> records/hash.ts)',
    "records/hash.ts:4 uses Node's Buffer (via index.ts -> records/hash.ts)",
  ]);
  t.same(nodeOnlyUses(sample, 'node.ts'), ["node.ts:1 uses Node's NodeJS (via node.ts)", "node.ts:1 uses Node's process (via node.ts)"], 'a type and a value');
  t.same(nodeOnlyUses(sample.slice(0, 2).map((f) => (f.path === 'index.ts' ? { ...f, text: "export * from './money.js';\n" } : f)), 'index.ts'), [], 'zod and a property named process are browser-safe');
});

t.test('args: the loop checks see a planted loop', async (t) => {
  const sample: SourceFile[] = [
    { path: 'fleet/api.ts', text: "import { GPU_PROBE_STATES } from '../protocol/agent-messages.js';\nexport const probe = GPU_PROBE_STATES;\n" },
    { path: 'protocol/agent-messages.ts', text: "import { probe } from '../fleet/api.js';\nexport const GPU_PROBE_STATES = probe;\n" },
    { path: 'fleet/pre-offer.ts', text: "export const GPU_PROBE_STATES = ['passed'] as const;\n" },
    { path: 'protocol/machine-api.ts', text: "import type { GPU_PROBE_STATES } from '../fleet/pre-offer.js';\nexport type Probe = typeof GPU_PROBE_STATES;\n" },
  ];
  const sampleEdges = importEdges(sample);
  t.same(folderLoops(sampleEdges), ['folders fleet, protocol import each other:\n  fleet -> protocol: fleet/api.ts:1 imports protocol/agent-messages.ts\n  protocol -> fleet: protocol/agent-messages.ts:1 imports fleet/api.ts, protocol/machine-api.ts:1 imports fleet/pre-offer.ts']);
  t.same(fileLoops(sampleEdges), ['files import each other: fleet/api.ts -> protocol/agent-messages.ts -> fleet/api.ts']);
  t.same(folderLoops(importEdges(sample.slice(2))), [], 'protocol/ importing fleet/ alone is no loop');
});
