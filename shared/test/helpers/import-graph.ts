import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import type { Test } from 'tap';
import ts from 'typescript';

/**
 * The import graph of a package's `src/`, read with the TypeScript parser, and its loops: the
 * part of an architecture test that does not depend on the package. Every architecture test
 * reads its sources and their imports here (shared's, the control plane's, the agent's, and the
 * repository's package boundaries).
 */

export interface SourceFile {
  /** Path relative to the folder read (a package's `src/`), with `/`. */
  path: string;
  text: string;
}

/** A module a file names. */
export interface ModuleImport {
  /** As written: `./x.js`, `@gpufarm/shared/node`, `node:fs`. */
  specifier: string;
  /** Its line (from 1), and its offset in the text, to order it among other findings. */
  line: number;
  pos: number;
}

/** Which files `listSources` reads. */
export interface SourceOptions {
  /** Whether a file is a source, by its name: `.ts` files unless told. */
  isSource?: (name: string) => boolean;
  /** Folders and files not read, by name: none unless told. */
  skip?: (name: string) => boolean;
}

export interface ImportEdge {
  from: string;
  to: string;
  line: number;
}

/** Every source file under `root` (`.ts` unless `options` say otherwise), with its path relative to `root`. */
export function listSources(root: string, options: SourceOptions = {}): SourceFile[] {
  const { isSource = (name) => name.endsWith('.ts'), skip = () => false } = options;
  const files: SourceFile[] = [];
  const read = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (skip(entry.name)) continue;
      const full = join(dir, entry.name);
      if (entry.isDirectory()) read(full);
      else if (isSource(entry.name)) files.push({ path: relative(root, full).split(sep).join('/'), text: readFileSync(full, 'utf8') });
    }
  };
  read(root);
  return files;
}

/** The folder of a file, or the file itself when it sits at the root of `src/`. */
export function nodeOf(path: string): string {
  const slash = path.indexOf('/');
  return slash < 0 ? path : path.slice(0, slash);
}

/** The file's syntax tree, parsed as TypeScript, TSX or JavaScript by its extension. */
export function parse(file: SourceFile): ts.SourceFile {
  const kind = /\.tsx$/.test(file.path) ? ts.ScriptKind.TSX : /\.[cm]?js$/.test(file.path) ? ts.ScriptKind.JS : ts.ScriptKind.TS;
  return ts.createSourceFile(file.path, file.text, ts.ScriptTarget.Latest, true, kind);
}

/**
 * Every module `file` names, in source order: import and export declarations (type-only ones
 * too), `import()` calls and types, `require()` calls, `import x = require()`, and the modules a
 * module file augments (`declare module 'fastify'`), as TypeScript's `preProcessFile` lists them.
 */
export function moduleImports(file: SourceFile, source: ts.SourceFile = parse(file)): ModuleImport[] {
  const found: ModuleImport[] = [];
  const visit = (node: ts.Node) => {
    let specifier: ts.Node | undefined;
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) specifier = node.moduleSpecifier;
    else if (ts.isCallExpression(node) && (node.expression.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(node.expression) && node.expression.text === 'require'))) specifier = node.arguments[0];
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) specifier = node.argument.literal;
    else if (ts.isExternalModuleReference(node)) specifier = node.expression;
    else if (ts.isModuleDeclaration(node) && ts.isExternalModule(source)) specifier = node.name;
    if (specifier && ts.isStringLiteral(specifier)) {
      const pos = specifier.getStart();
      found.push({ specifier: specifier.text, line: source.getLineAndCharacterOfPosition(pos).line + 1, pos });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** Every relative import and re-export of the files (type-only ones too: they are arrows as well). */
export function importEdges(files: readonly SourceFile[]): ImportEdge[] {
  const known = new Set(files.map((f) => f.path));
  const edges: ImportEdge[] = [];
  for (const file of files) {
    for (const { specifier, line } of moduleImports(file)) {
      if (!specifier.startsWith('.')) continue;
      const target = join(dirname(file.path), specifier).split(sep).join('/').replace(/\.js$/, '.ts');
      if (known.has(target)) edges.push({ from: file.path, to: target, line });
    }
  }
  return edges;
}

/** The strongly connected components of more than one node (Tarjan), each a set of nodes on a loop. */
function loops(nodes: Iterable<string>, next: (node: string) => readonly string[]): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let counter = 0;
  const connect = (v: string) => {
    index.set(v, counter);
    low.set(v, counter);
    counter++;
    stack.push(v);
    onStack.add(v);
    for (const w of next(v)) {
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const v of nodes) if (!index.has(v)) connect(v);
  return found;
}

/** One loop through `component`, as the path from its first node back to it. */
function cycleIn(component: readonly string[], next: (node: string) => readonly string[]): string[] {
  const members = new Set(component);
  const start = component[0]!;
  const previous = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift()!;
    for (const w of next(v)) {
      if (!members.has(w)) continue;
      if (w === start) {
        const path = [v];
        while (path[0] !== start) path.unshift(previous.get(path[0]!)!);
        return [...path, start];
      }
      if (!previous.has(w)) {
        previous.set(w, v);
        queue.push(w);
      }
    }
  }
  return [...component, start];
}

/** Each folder loop, named by the imports that close it (`a/x.ts:3 -> b/y.ts`). */
export function folderLoops(edges: readonly ImportEdge[]): string[] {
  const between = new Map<string, Map<string, ImportEdge[]>>();
  for (const edge of edges) {
    const a = nodeOf(edge.from);
    const b = nodeOf(edge.to);
    if (a === b) continue;
    const out = between.get(a) ?? new Map<string, ImportEdge[]>();
    between.set(a, out);
    out.set(b, [...(out.get(b) ?? []), edge]);
  }
  const next = (node: string) => [...(between.get(node)?.keys() ?? [])];
  return loops(between.keys(), next).map((component) => {
    const cycle = cycleIn(component, next);
    const steps = cycle.slice(1).map((to, i) => {
      const via = between.get(cycle[i]!)!.get(to)!;
      return `  ${cycle[i]} -> ${to}: ${via.map((e) => `${e.from}:${e.line} imports ${e.to}`).join(', ')}`;
    });
    return `folders ${component.join(', ')} import each other:\n${steps.join('\n')}`;
  });
}

/** Each file loop, named by its files in import order. */
export function fileLoops(edges: readonly ImportEdge[]): string[] {
  const out = new Map<string, string[]>();
  for (const edge of edges) out.set(edge.from, [...(out.get(edge.from) ?? []), edge.to]);
  const next = (file: string) => out.get(file) ?? [];
  return loops(out.keys(), next).map((component) => `files import each other: ${cycleIn(component, next).join(' -> ')}`);
}

/**
 * Reads the package's `src/` at `root` and registers the checks every architecture test makes:
 * the source was read, and no import loop joins two folders or two files. Answers what it read,
 * for the package's own checks.
 */
export function checkImportGraph(t: Test, root: string): { files: SourceFile[]; edges: ImportEdge[] } {
  const files = listSources(root);
  const edges = importEdges(files);
  t.test('default: the source was read', async (t) => {
    t.ok(files.length > 50, `${files.length} files under src/`);
    t.ok(edges.length > 100, `${edges.length} relative imports`);
  });
  t.test('behavior: no import loop joins two folders', async (t) => {
    t.same(folderLoops(edges), [], 'each loop is listed with the imports on it');
  });
  t.test('behavior: no import loop joins two files', async (t) => {
    t.same(fileLoops(edges), [], 'each loop is listed with its files');
  });
  return { files, edges };
}
