import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { serviceIndexSchema } from '@gpufarm/shared';
import t from 'tap';
import { buildTestApp, createTestKey } from '@gpufarm/control-plane/testing/app';
import { listening } from './helpers/control-plane.js';
import { installGlobally, outside, packWorkspace, workspaceImportsUnder } from './helpers/package.js';

const run = promisify(execFile);
// npm pack, the build and npm install -g into a prefix: minutes when other test files share the cores.
// Ten minutes: on the client's oldest Node this file runs beside the Node 24 pass (230 s there in
// a CI run on two cores, 78 s alone).
t.setTimeout(600_000);
const CLIENT = join(dirname(fileURLToPath(import.meta.url)), '..');
const ROOT = join(CLIENT, '..');
const TSC = createRequire(import.meta.url).resolve('typescript/bin/tsc');

const CONSUMER_TS = `import { createClient, GfError, type GfClient } from '@gpufarm/client';

const gf: GfClient = createClient({ baseUrl: 'http://127.0.0.1:1', retries: 0 });
const index = await gf.index();
const self: string = index.links.self;
// @ts-expect-error: the service index has no such field (fails if the types were any)
console.log(self, index.noSuchField);
const err = new GfError('network_error', 'down');
const status: number | null = err.status;
console.log(status);
`;

t.test('default: the packed tarball installs with npm outside the repository; gf and the SDK run from compiled JavaScript', async (t) => {
  const work = await mkdtemp(join(tmpdir(), 'gf-pack-'));
  t.teardown(() => rm(work, { recursive: true, force: true }));
  const version = (JSON.parse(await readFile(join(CLIENT, 'package.json'), 'utf8')) as { version: string }).version;

  // prepack builds dist/ (esbuild and the declaration rollup) before npm packs it.
  const { tarball, paths, dir: pkgDir, manifest } = await packWorkspace(ROOT, 'client', work);
  t.ok(existsSync(tarball), `${tarball} written`);
  for (const path of ['dist/gf.js', 'dist/index.js', 'dist/index.d.ts', 'dist/browser.js', 'dist/browser.d.ts', 'README.md']) t.ok(paths.includes(path), `${path} is packed`);
  t.same(paths.filter((p) => !p.startsWith('dist/') && p !== 'package.json' && p !== 'README.md'), [], 'only dist/, package.json and README.md');
  t.same(paths.filter((p) => /\.[cm]?tsx?$/.test(p) && !p.endsWith('.d.ts')), [], 'no TypeScript source');

  t.same(Object.keys(manifest.dependencies ?? {}).filter((name) => name.startsWith('@gpufarm/')), [], 'no @gpufarm/* package among the runtime dependencies');
  t.equal(manifest.bin?.gf, './dist/gf.js', 'the gf bin is the compiled entry');
  t.same(await workspaceImportsUnder(join(pkgDir, 'dist')), [], 'no import of a workspace package is left in dist/');
  t.match(await readFile(join(pkgDir, 'dist/gf.js'), 'utf8'), /^#!\/usr\/bin\/env node\n/, 'gf.js starts with its shebang');

  const prefix = await installGlobally(tarball, work);
  const installed = join(prefix, 'lib/node_modules/@gpufarm/client');
  t.notOk(existsSync(join(installed, 'node_modules/tsx')) || existsSync(join(installed, 'node_modules/typescript')), 'neither tsx nor typescript is installed with it');
  const gf = join(prefix, 'bin/gf');
  const versionOut = await outside(gf, ['--version'], work);
  t.equal(versionOut.stdout.trim(), version, 'gf --version prints the package version');
  const help = await outside(gf, ['--help'], work);
  t.match(help.stdout, /^Usage: gf /m, 'gf --help prints the usage');
  t.match(help.stdout, /\blogin\b/, 'with the commands');

  // A project of its own that installs the tarball, imports the SDK and type-checks against it.
  const consumer = join(work, 'consumer');
  await run('mkdir', ['-p', consumer]);
  await writeFile(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  const rootManifest = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
  await outside('npm', ['install', tarball, `@types/node@${rootManifest.devDependencies['@types/node']}`, '--no-audit', '--no-fund'], consumer);

  const s = await listening((appEnv) => buildTestApp(t, { env: appEnv }));
  const { key } = await createTestKey(s.db);
  await writeFile(join(consumer, 'index.mjs'), "import { createClient } from '@gpufarm/client';\nconsole.log(JSON.stringify(await createClient({ baseUrl: process.argv[2], apiKey: process.argv[3] }).index()));\n");
  const sdk = await outside(process.execPath, ['index.mjs', s.baseUrl, key], consumer);
  const index = serviceIndexSchema.parse(JSON.parse(sdk.stdout));
  t.equal(index.links.self, `${s.baseUrl}/v1`, 'the SDK read GET /v1 of a real control plane');

  // The installed gf's lazily loaded parts: the TOML config, the SDK, and YAML job files.
  const gfEnv = { XDG_CONFIG_HOME: join(work, 'config') };
  await outside(gf, ['login', '--endpoint', s.baseUrl], work, gfEnv, `${key}\n`);
  t.ok(existsSync(join(work, 'config/gpufarm/config.toml')), 'gf login saved the key in its TOML config');
  const capacity = await outside(gf, ['capacity', '--json'], work, gfEnv);
  t.equal((JSON.parse(capacity.stdout) as { object: string }).object, 'list', 'gf capacity --json answers the API page with the saved key');
  await writeFile(join(work, 'job.yaml'), 'image: busybox\ncommand: [true]\ngpu: { count: 0 }\n');
  const badJob = await outside(gf, ['run', '-f', 'job.yaml'], work, gfEnv).then(
    () => ({ code: 0, stderr: '' }),
    (err: { code?: number; stderr?: string }) => ({ code: err.code ?? 1, stderr: err.stderr ?? '' }),
  );
  t.equal(badJob.code, 2, 'a YAML job file with a bad field is a usage error');
  t.match(badJob.stderr, /gpu\.count/, 'naming the field the YAML parsed into');

  await writeFile(join(consumer, 'check.ts'), CONSUMER_TS);
  await writeFile(
    join(consumer, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, skipLibCheck: false, types: ['node'] }, files: ['check.ts'] }),
  );
  const typecheck = await outside(process.execPath, [TSC, '-p', consumer], consumer).then(
    () => ({ code: 0, output: '' }),
    (err: { code?: number; stdout?: string }) => ({ code: err.code ?? 1, output: err.stdout ?? '' }),
  );
  t.equal(typecheck.code, 0, `tsc --noEmit on a consumer of the bundled declarations passes:\n${typecheck.output}`);
});
