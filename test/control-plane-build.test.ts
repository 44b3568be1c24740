import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { serviceIndexSchema } from '@gpufarm/shared';
import t from 'tap';
import { createPostgresTestDatabase } from '@gpufarm/control-plane/testing/database';
import { checkEveryMigrationApplied } from './helpers/migrations.js';
import { spawnProcess } from './helpers/processes.js';

const run = promisify(execFile);
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const MAIN = join(ROOT, 'control-plane/dist/main.js');

/**
 * `node control-plane/dist/main.js ARGS` with plain node: no NODE_OPTIONS (tap puts tsx there),
 * so nothing TypeScript can be loaded; `env -u` drops it after tap has put it back.
 */
function compiled(args: string[], env: Record<string, string>, cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return run('env', ['-u', 'NODE_OPTIONS', process.execPath, MAIN, ...args], { cwd, env: { ...process.env, ...env } }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code?: number; stdout?: string; stderr?: string }) => ({ code: err.code ?? 1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' }),
  );
}

t.before(async () => {
  await run('npm', ['run', 'build', '-w', 'control-plane'], { cwd: ROOT });
});

t.test('default: dist/main.js imports only the control plane\'s dependencies (what npm ci --omit=dev installs) and no workspace package', async (t) => {
  const manifest = JSON.parse(await readFile(join(ROOT, 'control-plane/package.json'), 'utf8')) as { dependencies: Record<string, string> };
  const bundle = await readFile(MAIN, 'utf8');
  const specifiers = [...bundle.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|\brequire\(\s*)["']([^"'.][^"']*)["']/g)].map((m) => m[1]!).filter((s) => !s.startsWith('node:'));
  const packages = [...new Set(specifiers.map((s) => (s.startsWith('@') ? s.split('/').slice(0, 2).join('/') : s.split('/')[0]!)))];
  t.ok(packages.includes('fastify') && packages.includes('pg'), `the imports are found: ${packages.join(', ')}`);
  t.same(packages.filter((name) => !(name in manifest.dependencies) || name.startsWith('@gpufarm/')), [], 'each is a dependency, none a workspace package');
});

t.test('default: migrate applies every migration to an empty database; the compiled server then serves on it with GF_MIGRATE_ON_START=false', async (t) => {
  const work = await mkdtemp(join(tmpdir(), 'gf-cp-build-'));
  t.teardown(() => rm(work, { recursive: true, force: true }));
  const { db, url } = await createPostgresTestDatabase(t, { empty: true });
  const env = { DATABASE_URL: url!, GF_DATA_DIR: join(work, 'data'), GF_MIGRATE_ON_START: 'false', HOST: '127.0.0.1', PORT: '0', GF_LOG_LEVEL: 'info' };

  const migrated = await compiled(['migrate'], env, work);
  t.equal(migrated.code, 0, `migrate exits 0:\n${migrated.stderr}`);
  await checkEveryMigrationApplied(t, db, migrated.stdout);
  const [jobs] = await db.query<{ present: boolean }>("SELECT to_regclass('jobs') IS NOT NULL AS present");
  t.ok(jobs?.present, 'the jobs table exists');

  const again = await compiled(['migrate'], env, work);
  t.equal(again.code, 0, 'a second migrate exits 0');
  t.match(again.stdout, /no pending migrations/, 'and applies nothing');

  const server = spawnProcess('control-plane', 'env', ['-u', 'NODE_OPTIONS', process.execPath, MAIN], { cwd: work, env });
  t.teardown(() => server.kill());
  const [, base] = await server.waitForOutput(/Server listening at (http:\/\/127\.0\.0\.1:\d+)/, 'the listening line');
  const index = await fetch(`${base}/v1`);
  t.equal(index.status, 200, 'GET /v1 answers');
  t.equal(serviceIndexSchema.parse(await index.json()).links.self, `${base}/v1`, 'with the service index');
  const page = await fetch(`${base}/docs`);
  t.equal(page.status, 200, 'GET /docs answers');
  const css = await fetch(`${base}/docs/assets/docs-page.css`);
  t.equal(css.status, 200, 'the page stylesheet loads from assets/');
  t.equal(await css.text(), await readFile(join(ROOT, 'control-plane/assets/docs-page.css'), 'utf8'), 'with the file’s bytes');
  const bundle = await fetch(`${base}/docs/assets/swagger-ui-bundle.js`);
  t.equal(bundle.status, 200, 'swagger-ui-dist’s script loads');
  t.ok((await bundle.arrayBuffer()).byteLength > 100_000, 'whole');

  await server.stop();
  t.equal(await server.exited, 0, 'SIGTERM ends it with code 0');
  t.notMatch(server.output(), /tsx/, 'nothing mentions tsx');
});

t.test('error: with GF_MIGRATE_ON_START=false an unmigrated database stops the start, saying to run migrate', async (t) => {
  const work = await mkdtemp(join(tmpdir(), 'gf-cp-build-'));
  t.teardown(() => rm(work, { recursive: true, force: true }));
  const { db, url } = await createPostgresTestDatabase(t, { empty: true });
  const started = await compiled([], { DATABASE_URL: url!, GF_DATA_DIR: join(work, 'data'), GF_MIGRATE_ON_START: 'false', HOST: '127.0.0.1', PORT: '0' }, work);
  t.equal(started.code, 1, 'exits 1');
  t.match(started.stderr, /lacks \d+ migration\(s\).*run `gpufarm-control-plane migrate`/, `the message says to run migrate:\n${started.stderr}`);
  const [table] = await db.query<{ present: boolean }>("SELECT to_regclass('schema_migrations') IS NOT NULL AS present");
  t.notOk(table?.present, 'and it created nothing');
});

t.test('error: an unknown argument is a usage error', async (t) => {
  const work = await mkdtemp(join(tmpdir(), 'gf-cp-build-'));
  t.teardown(() => rm(work, { recursive: true, force: true }));
  const started = await compiled(['migrat'], { GF_DATA_DIR: join(work, 'data') }, work);
  t.equal(started.code, 2, 'exits 2');
  t.match(started.stderr, /unknown arguments "migrat"/, 'naming it');
});
