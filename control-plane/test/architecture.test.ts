import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import ts from 'typescript';
import { checkImportGraph, fileLoops, folderLoops, importEdges, nodeOf, parse, type ImportEdge, type SourceFile } from '@gpufarm/shared/testing/import-graph';

/**
 * The control plane's layering, read from its source with the TypeScript parser:
 * - no import loop between two folders of `src/` (a file at the root, such as `config.ts` or
 *   `server.ts`, is a node of its own), and none between two files;
 * - SQL only in store files (`store.ts`, `*-store.ts`), the database infrastructure (`db/`), and
 *   the test and demo kit (`testing/`: factories, the simulated fleet);
 * - production code imports nothing of `testing/` (the bundle reaches no test kit from `main.ts`);
 * - infrastructure (`db/`, `http/`, `background/`, `config.ts`, `deployment-file.ts` (the chain
 *   deployment `GF_CHAIN_FILE` names, read by the configuration), `ids.ts`, `local-state.ts`, `logger.ts`,
 *   `package-files.ts`) imports no slice;
 * - a table is written by its owner's store only (others call that store).
 * The import graph and its loops are shared with the agent's architecture test
 * (shared/test/helpers/import-graph.ts).
 */

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../src');
const INFRASTRUCTURE = new Set(['db', 'http', 'background', 'config.ts', 'deployment-file.ts', 'ids.ts', 'local-state.ts', 'logger.ts', 'package-files.ts']);
/** Statement shapes, upper case as the code writes SQL (prose never does). */
const SQL_TEXT = /\bSELECT\b[\s\S]*\bFROM\b|\bINSERT\s+INTO\b|\bUPDATE\s+\w+(\s+\w+)?\s+SET\b|\bDELETE\s+FROM\b|\bpg_notify\b|\bFOR\s+UPDATE\b/;

/** The test and demo kit (`@gpufarm/control-plane/testing`): it writes rows directly, and production code never imports it. */
const TESTING = 'testing/';

/** Where SQL may be written: a slice's store files, the database infrastructure, test and demo data. */
export function mayHoldSql(path: string): boolean {
  const name = path.slice(path.lastIndexOf('/') + 1);
  return name === 'store.ts' || name.endsWith('-store.ts') || path.startsWith('db/') || path.startsWith(TESTING);
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

/** Each import of the test and demo kit from production code, as `file:line imports …`. */
export function productionImportingTesting(edges: readonly ImportEdge[]): string[] {
  return edges
    .filter((e) => !e.from.startsWith(TESTING) && e.to.startsWith(TESTING))
    .map((e) => `${e.from}:${e.line} imports ${e.to}, but production code imports no test kit`);
}

/**
 * The one writer of each owned table: a store file, or a slice (`machines/`: any store file in
 * that folder). Everyone else calls the owner. `machines`, `machine_gpus` and the uptime days
 * are the machines slice's; farms, their operators and enrollment tokens the farms slice's.
 */
const TABLE_OWNERS: Readonly<Record<string, string>> = {
  jobs: 'jobs/store.ts',
  machines: 'machines/',
  machine_gpus: 'machines/',
  machine_uptime_days: 'machines/',
  farms: 'farms/store.ts',
  farm_operators: 'farms/store.ts',
  enrollment_tokens: 'farms/store.ts',
  gpu_challenges: 'machine-verification/challenge-store.ts',
  machine_images: 'agent-gateway/image-store.ts',
  job_phases: 'phases/store.ts',
};

/** Whether `path` is the owner `owner` names: that store file, or a store file in that folder. */
export function isOwner(path: string, owner: string): boolean {
  if (!owner.endsWith('/')) return path === owner;
  const name = path.slice(path.lastIndexOf('/') + 1);
  return path.startsWith(owner) && !path.slice(owner.length).includes('/') && (name === 'store.ts' || name.endsWith('-store.ts'));
}

/** Each write to an owned table from a file other than its owner (test and demo data aside), as `file:line: table`. */
export function writesPastOwners(files: readonly SourceFile[], owners: Readonly<Record<string, string>>): string[] {
  const found: string[] = [];
  for (const file of files) {
    if (file.path.startsWith(TESTING)) continue;
    file.text.split('\n').forEach((text, i) => {
      for (const match of text.matchAll(/\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(\w+)/g)) {
        const table = match[1]!;
        const owner = owners[table];
        if (owner !== undefined && !isOwner(file.path, owner)) found.push(`${file.path}:${i + 1}: writes ${table}, owned by ${owner}`);
      }
    });
  }
  return found;
}

const { files, edges } = checkImportGraph(t, SRC);

t.test('behavior: SQL stands only in store files and db/', async (t) => {
  t.same(sqlOutsideStores(files), [], 'each SQL site is listed as file:line');
});

t.test('behavior: infrastructure imports no slice', async (t) => {
  t.same(infrastructureImportingUp(edges), [], 'each such import is listed as file:line');
});

t.test('behavior: production code imports nothing of testing/', async (t) => {
  t.same(productionImportingTesting(edges), [], 'each such import is listed as file:line');
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
  t.same(writesPastOwners([{ path: 'b/store.ts', text: "\nconst sql = 'UPDATE jobs SET status = $2';\n" }], { jobs: 'a/store.ts' }), ['b/store.ts:2: writes jobs, owned by a/store.ts']);
});

t.test('args: an import of the test kit from production code is seen', async (t) => {
  const sample: SourceFile[] = [
    { path: 'testing/factories.ts', text: "import { newId } from '../ids.js';\nexport const createFarm = () => newId();\n" },
    { path: 'testing/index.ts', text: "export * from './factories.js';\n" },
    { path: 'ids.ts', text: 'export const newId = () => 1;\n' },
    { path: 'fleet/routes.ts', text: "import { newId } from '../ids.js';\nimport { createFarm } from '../testing/index.js';\n" },
  ];
  t.same(productionImportingTesting(importEdges(sample)), ['fleet/routes.ts:2 imports testing/index.ts, but production code imports no test kit']);
  t.same(writesPastOwners([{ path: 'testing/factories.ts', text: "const a = 'INSERT INTO jobs (id) VALUES ($1)';\n" }], { jobs: 'jobs/store.ts' }), [], 'the kit writes rows directly');
});

t.test('args: a second writer of a slice-owned table is seen', async (t) => {
  const owners = { machines: 'machines/' };
  const planted: SourceFile[] = [
    { path: 'machines/store.ts', text: "const a = 'UPDATE machines SET status = $2';\n" },
    { path: 'machines/drain-store.ts', text: "const b = 'UPDATE machines SET cordoned = $2';\n" },
    { path: 'machines/state.ts', text: "const c = 'UPDATE machines SET status = $2';\n" },
    { path: 'machines/sub/store.ts', text: "const d = 'DELETE FROM machines WHERE id = $1';\n" },
    { path: 'fleet/drain-store.ts', text: "\nconst e = `INSERT INTO machines (id) VALUES ($1)`;\n" },
  ];
  t.same(writesPastOwners(planted, owners), [
    'machines/state.ts:1: writes machines, owned by machines/',
    'machines/sub/store.ts:1: writes machines, owned by machines/',
    'fleet/drain-store.ts:2: writes machines, owned by machines/',
  ], 'a store of the slice writes it; a non-store file of it, a nested folder or another slice does not');
});
