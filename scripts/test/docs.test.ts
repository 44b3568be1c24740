import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { z } from 'zod';
import { generatedPages, ROOT, withSection } from '../src/docs.js';
import { typeText, type ApiDocument } from '../src/docs/api-reference.js';
import { decisionHeadings, decisionsIndex } from '../src/docs/decisions.js';
import { brokenLinks, githubSlug, headings, markdownFiles } from '../src/docs/markdown.js';
import { settingRows } from '../src/docs/settings-table.js';

/** Every page the docs checks read: the README, the agent package's README and docs/. */
const PAGES = ['README.md', 'agent/README.md', ...markdownFiles(ROOT, 'docs')];
/** The .deb installs docs/operators alone (/usr/share/doc/gf-agent), so its links stay inside it. */
const CONFINED = ['docs/operators'];

t.test('the derived text is what npm run docs writes: configuration tables, error codes, the decisions index', async (t) => {
  for (const [file, { current, generated }] of generatedPages()) {
    t.ok(current === generated, `${file} is current (run npm run docs)`);
  }
});

t.test('a setting without its doc entry, or an entry without its setting, stops npm run docs', async (t) => {
  const schema = z.object({ GF_A: z.coerce.number().int().min(1).max(9).default(3), GF_B: z.string().optional() });
  t.throws(() => settingRows(schema, { GF_A: { description: 'a' } }), /GF_B has no doc entry/);
  t.throws(() => settingRows(schema, { GF_A: { description: 'a' }, GF_B: { description: 'b' }, GF_C: { description: 'c' } }), /GF_C names no setting/);
  t.same(settingRows(schema, { GF_A: { description: 'a' }, GF_B: { description: 'b', default: 'unset (`npm start`: x)' } }), [
    { key: 'GF_A', type: 'integer 1–9', default: '`3`', description: 'a' },
    { key: 'GF_B', type: 'string', default: 'unset (`npm start`: x)', description: 'b' },
  ]);
  t.throws(() => withSection('# no markers\n', 'x.md', 'index', 'text'), /x\.md has no .* markers/);
});

t.test('every relative link and #anchor in README.md, agent/README.md and docs/ resolves', async (t) => {
  t.ok(PAGES.length > 20, `${PAGES.length} pages read`);
  const broken = brokenLinks(ROOT, PAGES, CONFINED);
  t.same(broken.map((b) => `${b.file}:${b.line}: ${b.target}: ${b.problem}`), [], 'no broken link');
});

t.test('the link check fails on what GitHub would not resolve', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'gf-docs-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  mkdirSync(join(root, 'docs/operators'), { recursive: true });
  writeFileSync(join(root, 'docs/a.md'), '# Page A\n\n## The `gf` command line\n\n## Repeat\n\n## Repeat\n\n```md\n[in code](missing.md)\n```\n');
  writeFileSync(join(root, 'docs/operators/README.md'), '# Ops\n\n[out of the folder](../a.md)\n');
  writeFileSync(
    join(root, 'README.md'),
    [
      '[ok](docs/a.md#the-gf-command-line) [second](docs/a.md#repeat-1) [web](https://example.com/x#y) `[code](nope.md)`',
      '[no file](docs/b.md) [no anchor](docs/a.md#nope) [self](#page-a)',
      '[ref]: docs/missing.md',
    ].join('\n'),
  );
  const found = brokenLinks(root, ['README.md', 'docs/a.md', 'docs/operators/README.md'], ['docs/operators']).map((b) => `${b.file}:${b.line} ${b.target}`);
  t.same(found, ['README.md:2 docs/b.md', 'README.md:2 docs/a.md#nope', 'README.md:2 #page-a', 'README.md:3 docs/missing.md', 'docs/operators/README.md:3 ../a.md']);
});

t.test("anchors are GitHub's", async (t) => {
  t.equal(githubSlug('The `gf` command line'), 'the-gf-command-line');
  t.equal(githubSlug('Fund a job from a wallet (with foundry\'s `cast`)'), 'fund-a-job-from-a-wallet-with-foundrys-cast');
  t.equal(githubSlug('Agent package (agent/build.ts, scripts/build-agent-deb.sh)'), 'agent-package-agentbuildts-scriptsbuild-agent-debsh');
  t.equal(githubSlug('GF_CHAIN_FILE and `GF_*` — one schema'), 'gf_chain_file-and-gf_--one-schema');
  t.same(headings('# A\n## B\n## B\n```\n# not a heading\n```\n').map((h) => h.slug), ['a', 'b', 'b-1']);
});

t.test('the README stays short', async (t) => {
  const { readFileSync } = await import('node:fs');
  const lines = readFileSync(join(ROOT, 'README.md'), 'utf8').split('\n').length;
  t.ok(lines <= 200, `README.md has ${lines} lines (at most 200: the rest goes to docs/)`);
});

t.test('docs/API.md has every operation and schema of the OpenAPI document, their types as the document gives them', async (t) => {
  const { readFileSync } = await import('node:fs');
  const { buildOpenApiDocument } = await import('@gpufarm/control-plane/openapi');
  const document = buildOpenApiDocument('https://gpufarm.example') as unknown as ApiDocument;
  const page = readFileSync(join(ROOT, 'docs/API.md'), 'utf8');
  const titles = new Set(headings(page).map((h) => h.text));
  for (const [path, methods] of Object.entries(document.paths)) {
    for (const method of Object.keys(methods).filter((m) => m !== 'head')) t.ok(titles.has(`\`${method.toUpperCase()} ${path}\``), `${method.toUpperCase()} ${path} has its section`);
  }
  for (const name of Object.keys(document.components.schemas).filter((n) => !n.startsWith('__'))) t.ok(titles.has(name), `schema ${name} has its section`);
  t.equal(typeText({ type: 'integer', minimum: 1, maximum: 100, default: 20 }), 'integer 1–100');
  t.equal(typeText({ type: 'number', exclusiveMinimum: 0, maximum: 1024 }), 'number > 0, ≤ 1024');
  t.equal(typeText({ anyOf: [{ type: 'string', format: 'date-time', pattern: '^x$' }, { type: 'null' }] }), 'string date-time or null');
  t.equal(typeText({ type: 'array', maxItems: 8, items: { $ref: '#/components/schemas/Job' } }), 'array ≤ 8 items of [Job](#job)');
  t.equal(typeText({ type: 'string', maxLength: 120 }), 'string ≤ 120 chars');
});

t.test('every decision has a status, shown in the index; an entry without one stops npm run docs', async (t) => {
  const page = [
    '# Decisions', '', '## Group', '', '### Old way', '*Replaced by [New way](#new-way).* Its text: history.', '',
    '### New way', '*In force since 2026-11-25.* We do it anew.', '', '## Alone', '', '*In force.*', '', '- a list', '',
  ].join('\n');
  t.same(decisionHeadings(page).map((h) => [h.text, h.status?.kind ?? null]), [['Group', null], ['Old way', 'replaced'], ['New way', 'in force'], ['Alone', 'in force']]);
  t.equal(decisionsIndex(page), [
    '- [Group](#group)',
    '  - [Old way](#old-way): replaced by [New way](#new-way)',
    '  - [New way](#new-way)',
    '- [Alone](#alone)',
  ].join('\n'));
  t.throws(() => decisionHeadings('# D\n\n## A\nWe chose A.\n\n## B\n*In force.* B.\n'), /entry begins with its status.*"A" \(line 3\)/);
  t.throws(() => decisionHeadings('# D\n\n## A\n*Replaced by [C](#c).* Gone.\n'), /"A" is replaced by #c, which no heading makes/);
  const { readFileSync } = await import('node:fs');
  const entries = decisionHeadings(readFileSync(join(ROOT, 'docs/decisions.md'), 'utf8')).filter((h) => h.status !== null);
  t.ok(entries.length > 400, `docs/decisions.md: ${entries.length} entries, each with its status`);
});
