import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { z } from 'zod';
import { generatedPages, ROOT, withSection } from '../src/docs.js';
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
