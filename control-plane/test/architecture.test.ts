import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import ts from 'typescript';

/**
 * The control plane's layering, read from its source with the TypeScript parser:
 * - no import loop between two folders of `src/` (a file at the root, such as `config.ts` or
 *   `server.ts`, is a node of its own), and none between two files;
 * - SQL only in store files (`store.ts`, `*-store.ts`), the database infrastructure (`db/`), and
 *   the test and demo data writers (`factories.ts`, `fleet/seed.ts`);
 * - infrastructure (`db/`, `http/`, `background/`, `config.ts`, `deployment-file.ts` (the chain
 *   deployment `GF_CHAIN_FILE` names, read by the configuration), `ids.ts`, `local-state.ts`,
 *   `package-files.ts`) imports no slice;
 * - a table is written by its owner's store only (others call that store).
 */

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../src');
const INFRASTRUCTURE = new Set(['db', 'http', 'background', 'config.ts', 'deployment-file.ts', 'ids.ts', 'local-state.ts', 'package-files.ts']);
/** Statement shapes, upper case as the code writes SQL (prose never does). */
const SQL_TEXT = /\bSELECT\b[\s\S]*\bFROM\b|\bINSERT\s+INTO\b|\bUPDATE\s+\w+(\s+\w+)?\s+SET\b|\bDELETE\s+FROM\b|\bpg_notify\b|\bFOR\s+UPDATE\b/;

export interface SourceFile {
  /** Path relative to `src/`, with `/`. */
  path: string;
  text: string;
}

export interface ImportEdge {
  from: string;
  to: string;
  line: number;
}

function listSources(dir: string): SourceFile[] {
  const files: SourceFile[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) files.push(...listSources(full));
    else if (entry.name.endsWith('.ts')) files.push({ path: relative(SRC, full).split(sep).join('/'), text: readFileSync(full, 'utf8') });
  }
  return files;
}

/** The folder of a file, or the file itself when it sits at the root of `src/`. */
export function nodeOf(path: string): string {
  const slash = path.indexOf('/');
  return slash < 0 ? path : path.slice(0, slash);
}

function parse(file: SourceFile): ts.SourceFile {
  return ts.createSourceFile(file.path, file.text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
}

/** Every relative import and re-export of the files (type-only ones too: they are arrows as well). */
export function importEdges(files: readonly SourceFile[]): ImportEdge[] {
  const known = new Set(files.map((f) => f.path));
  const edges: ImportEdge[] = [];
  for (const file of files) {
    const source = parse(file);
    const visit = (node: ts.Node) => {
      let specifier: ts.Expression | undefined;
      if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) specifier = node.moduleSpecifier;
      else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) specifier = node.arguments[0];
      if (specifier && ts.isStringLiteral(specifier) && specifier.text.startsWith('.')) {
        const target = join(dirname(file.path), specifier.text).split(sep).join('/').replace(/\.js$/, '.ts');
        if (known.has(target)) edges.push({ from: file.path, to: target, line: source.getLineAndCharacterOfPosition(specifier.getStart()).line + 1 });
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
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

/** Where SQL may be written: a slice's store files, the database infrastructure, test and demo data. */
export function mayHoldSql(path: string): boolean {
  const name = path.slice(path.lastIndexOf('/') + 1);
  return name === 'store.ts' || name.endsWith('-store.ts') || path.startsWith('db/') || name === 'factories.ts' || path === 'fleet/seed.ts';
}

/** Each SQL text or `.query(…)` call outside the files that may hold SQL, as `file:line: what`. */
export function sqlOutsideStores(files: readonly SourceFile[]): string[] {
  const found: string[] = [];
  for (const file of files) {
    if (mayHoldSql(file.path)) continue;
    const source = parse(file);
    const at = (node: ts.Node) => `${file.path}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}`;
    const visit = (node: ts.Node) => {
      if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && node.expression.name.text === 'query') {
        found.push(`${at(node)}: a .query() call`);
      } else if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateExpression(node)) {
        const text = ts.isTemplateExpression(node) ? [node.head.text, ...node.templateSpans.map((s) => s.literal.text)].join(' ') : node.text;
        if (SQL_TEXT.test(text)) found.push(`${at(node)}: SQL text ${JSON.stringify(text.replace(/\s+/g, ' ').trim().slice(0, 60))}`);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

/** Each import from infrastructure into a slice or a root file above it. */
export function infrastructureImportingUp(edges: readonly ImportEdge[]): string[] {
  return edges
    .filter((e) => INFRASTRUCTURE.has(nodeOf(e.from)) && !INFRASTRUCTURE.has(nodeOf(e.to)))
    .map((e) => `${e.from}:${e.line} imports ${e.to}, but ${nodeOf(e.from)} is infrastructure and imports no slice`);
}

/**
 * The stores that write each owned table. `machines` has three owners: the gateway's stores
 * (enrollment, hello, heartbeat, liveness), machine verification (its verification and proof columns),
 * which sits below the gateway, and the fleet's drain store (drain and cordon columns).
 */
const TABLE_OWNERS: Readonly<Record<string, readonly string[]>> = {
  jobs: ['jobs/store.ts'],
  machines: ['agent-gateway/store.ts', 'agent-gateway/machine-store.ts', 'machine-verification/challenge-store.ts', 'fleet/drain-store.ts'],
  gpu_challenges: ['machine-verification/challenge-store.ts'],
  machine_images: ['agent-gateway/image-store.ts'],
  job_phases: ['phases/store.ts'],
};

/** Each write to an owned table from a file other than its owners (test and demo data aside), as `file:line: table`. */
export function writesPastOwners(files: readonly SourceFile[], owners: Readonly<Record<string, readonly string[]>>): string[] {
  const found: string[] = [];
  for (const file of files) {
    const name = file.path.slice(file.path.lastIndexOf('/') + 1);
    if (name === 'factories.ts' || file.path === 'fleet/seed.ts') continue;
    file.text.split('\n').forEach((text, i) => {
      for (const match of text.matchAll(/\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(\w+)/g)) {
        const table = match[1]!;
        const allowed = owners[table];
        if (allowed && !allowed.includes(file.path)) found.push(`${file.path}:${i + 1}: writes ${table}, owned by ${allowed.join(', ')}`);
      }
    });
  }
  return found;
}

const files = listSources(SRC);
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

t.test('behavior: SQL stands only in store files and db/', async (t) => {
  t.same(sqlOutsideStores(files), [], 'each SQL site is listed as file:line');
});

t.test('behavior: infrastructure imports no slice', async (t) => {
  t.same(infrastructureImportingUp(edges), [], 'each such import is listed as file:line');
});

t.test('behavior: each owned table is written by its owner only', async (t) => {
  t.same(writesPastOwners(files, TABLE_OWNERS), [], 'each write is listed as file:line');
});

t.test('args: the checks see a loop and inline SQL', async (t) => {
  const sample: SourceFile[] = [
    { path: 'a/one.ts', text: "import { two } from '../b/two.js';\nexport const one = () => two();\n" },
    { path: 'b/two.ts', text: "import { one } from '../a/one.js';\nexport const two = () => one();\n" },
    { path: 'b/rows.ts', text: "export const rows = (db: { query(sql: string): unknown }) =>\n  db.query(`SELECT id FROM jobs`);\n" },
    { path: 'db/pool.ts', text: "import { one } from '../a/one.js';\nexport const pool = one;\n" },
  ];
  const sampleEdges = importEdges(sample);
  t.same(folderLoops(sampleEdges), ['folders a, b import each other:\n  a -> b: a/one.ts:1 imports b/two.ts\n  b -> a: b/two.ts:1 imports a/one.ts']);
  t.same(fileLoops(sampleEdges), ['files import each other: a/one.ts -> b/two.ts -> a/one.ts']);
  t.same(sqlOutsideStores(sample), ['b/rows.ts:2: a .query() call', 'b/rows.ts:2: SQL text "SELECT id FROM jobs"']);
  t.same(infrastructureImportingUp(sampleEdges), ['db/pool.ts:1 imports a/one.ts, but db is infrastructure and imports no slice']);
  t.same(writesPastOwners([{ path: 'b/store.ts', text: "\nconst sql = 'UPDATE jobs SET status = $2';\n" }], { jobs: ['a/store.ts'] }), ['b/store.ts:2: writes jobs, owned by a/store.ts']);
});
