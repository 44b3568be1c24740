import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { serviceIndexSchema } from '@gpufarm/shared';
import t, { type Test } from 'tap';
import { z } from 'zod';
import { createPostgresTestDatabase } from '@gpufarm/control-plane/testing/database';
import { checkEveryMigrationApplied } from './helpers/migrations.js';
import { onEmergencyExit, spawnProcess, type TestProcess } from './helpers/processes.js';

/**
 * The control plane's image as an operator runs it: built by scripts/build-control-plane-image.sh
 * (or reused when its inputs are unchanged), then run with `docker run` on this machine's Docker
 * and PostgreSQL: `migrate` on an empty database, the server on it, a bad setting, the defaults
 * the image sets. Every container has a name of this test's own and is removed at the end.
 */

// The first build stages node_modules, copies a few hundred MB into vfs layers and pushes them: minutes.
t.setTimeout(600_000);

const run = promisify(execFile);
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const recordSchema = z.object({
  repository: z.string(),
  digest: z.string().regex(/^sha256:[0-9a-f]{64}$/),
  reference: z.string(),
  nodeVersion: z.string().regex(/^v\d+\.\d+\.\d+$/),
  sizeBytes: z.number().int().positive(),
});
const imageConfigSchema = z.object({
  User: z.string(),
  WorkingDir: z.string(),
  Entrypoint: z.array(z.string()),
  ExposedPorts: z.record(z.string(), z.unknown()),
  Env: z.array(z.string()),
});

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** `docker ARGS`, its exit code and output whether it succeeded or not. */
function docker(args: string[]): Promise<Ran> {
  return run('docker', args, { maxBuffer: 16 * 1024 * 1024 }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code?: number; stdout?: string; stderr?: string }) => ({ code: typeof err.code === 'number' ? err.code : 1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' }),
  );
}

/** A container name of this test's own, removed (only it) when the test ends or the process dies. */
function containerName(t: Test): string {
  const name = `gf-cp-image-test-${randomBytes(4).toString('hex')}`;
  const remove = () => execFileSync('docker', ['rm', '-f', name], { stdio: 'ignore' });
  const forget = onEmergencyExit(remove);
  t.teardown(async () => {
    await docker(['rm', '-f', name]);
    forget();
  });
  return name;
}

/**
 * SIGTERM to `docker run` (which passes it on) ends the container with code 0, as the client and
 * the container's own record (State) say; the time taken and the output are in the messages.
 */
async function stopsOnSigterm(t: Test, server: TestProcess, name: string): Promise<void> {
  const stopping = Date.now();
  await server.stop(20_000);
  t.equal(await server.exited, 0, `SIGTERM ends it with code 0 (in ${Date.now() - stopping} ms); its output:\n${server.output().slice(-4000)}`);
  const state = await docker(['inspect', '--format', '{{.State.Status}} {{.State.ExitCode}}', name]);
  t.equal(state.stdout.trim(), 'exited 0', 'the container exited with code 0, by its own record');
}

let image = '';
let nodeVersion = '';

t.before(async () => {
  const { stdout } = await run('bash', [join(ROOT, 'scripts/build-control-plane-image.sh')], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 });
  const record = recordSchema.parse(JSON.parse(await readFile(join(ROOT, '.gpufarm/control-plane-image.json'), 'utf8')));
  t.equal(stdout.trim().split('\n').at(-1), record.reference, 'the build prints the pinned reference it recorded');
  image = record.reference;
  nodeVersion = record.nodeVersion;
  t.comment(`${image}: ${(record.sizeBytes / 1e6).toFixed(0)} MB, Node ${record.nodeVersion}`);
});

t.test('default: the image runs Node 24 as the non-root user gpufarm, with no shell', async (t) => {
  // One container for every question (each `docker run` copies the whole image on vfs).
  const probe = [
    'const { existsSync } = require("node:fs");',
    'console.log(JSON.stringify({ version: process.version, uid: process.getuid(), gid: process.getgid(), user: require("node:os").userInfo().username,',
    'cwd: process.cwd(), shells: ["/bin/sh", "/bin/busybox", "/bin/bash"].filter((f) => existsSync(f)) }));',
  ].join(' ');
  const ran = await docker(['run', '--rm', '--name', containerName(t), '--entrypoint', '/usr/bin/node', image, '-e', probe]);
  t.equal(ran.code, 0, `node runs in the image:\n${ran.stderr}`);
  const seen = z.object({ version: z.string(), uid: z.number(), gid: z.number(), user: z.string(), cwd: z.string(), shells: z.array(z.string()) }).parse(JSON.parse(ran.stdout));
  t.equal(seen.version, nodeVersion, `node is ${nodeVersion}`);
  t.match(seen.version, /^v24\./, 'Node 24');
  t.same([seen.uid, seen.gid, seen.user, seen.cwd], [10001, 10001, 'gpufarm', '/app'], 'uid and gid 10001, named gpufarm in /etc/passwd, in /app');
  t.same(seen.shells, [], 'no shell: the build stage’s busybox stayed there');

  const inspected = await docker(['image', 'inspect', '--format', '{{json .Config}}', image]);
  const config = imageConfigSchema.parse(JSON.parse(inspected.stdout));
  t.equal(config.User, '10001:10001', 'Config.User');
  t.same(config.Entrypoint, ['/usr/bin/node', '/app/dist/main.js'], 'the entry point is the compiled control plane');
  t.equal(config.WorkingDir, '/app', 'WorkingDir');
  t.same(Object.keys(config.ExposedPorts), ['8080/tcp'], 'it exposes 8080');
  for (const setting of ['HOST=0.0.0.0', 'PORT=8080', 'GF_DATA_DIR=/var/lib/gpufarm', 'GF_MIGRATE_ON_START=false', 'GF_WEB_DIR=/app/web']) t.ok(config.Env.includes(setting), `ENV ${setting}`);
});

t.test('default: migrate on an empty database, then the server on it answers GET /v1, the OpenAPI document and the dashboard, as uid 10001', async (t) => {
  const { db, url } = await createPostgresTestDatabase(t, { empty: true });

  const migrated = await docker(['run', '--rm', '--name', containerName(t), '--network', 'host', '-e', `DATABASE_URL=${url!}`, image, 'migrate']);
  t.equal(migrated.code, 0, `docker run IMAGE migrate exits 0:\n${migrated.stderr}`);
  await checkEveryMigrationApplied(t, db, migrated.stdout);

  // Host networking reaches this machine's PostgreSQL; HOST and PORT keep the server on loopback and a free port.
  const name = containerName(t);
  // Without --rm: `docker run` then returns when the container exits, not after the removal of its
  // copy of the image, which on vfs took 6.5 s at 0.3 CPU and more under a loaded CI (containerName removes it).
  const server = spawnProcess('control-plane-image', 'docker', ['run', '--name', name, '--network', 'host', '-e', `DATABASE_URL=${url!}`, '-e', 'HOST=127.0.0.1', '-e', 'PORT=0', image]);
  t.teardown(() => server.kill());
  const [, base] = await server.waitForOutput(/Server listening at (http:\/\/127\.0\.0\.1:\d+)/, 'the listening line', 60_000);
  const index = await fetch(`${base}/v1`);
  t.equal(index.status, 200, 'GET /v1 answers');
  t.equal(serviceIndexSchema.parse(await index.json()).links.self, `${base}/v1`, 'with the service index');
  const openapi = await fetch(`${base}/v1/openapi.json`);
  t.equal(openapi.status, 200, 'GET /v1/openapi.json answers');
  t.match(await openapi.json(), { openapi: /^3\.1\./, paths: { '/v1/jobs': {} } }, 'with the OpenAPI 3.1 document');
  // The image carries the dashboard the build script built (GF_WEB_DIR=/app/web).
  const indexHtml = await readFile(join(ROOT, 'web/dist/index.html'), 'utf8');
  const dashboard = await fetch(`${base}/dashboard/`);
  t.equal(dashboard.status, 200, 'GET /dashboard/ answers');
  t.equal(await dashboard.text(), indexHtml, "with the web app's index.html");
  t.match(dashboard.headers.get('content-type'), /^text\/html/, 'as HTML');
  t.match(dashboard.headers.get('content-security-policy'), /default-src 'self'; script-src 'self'.*frame-ancestors 'none'/, 'with the Content-Security-Policy');
  const script = /<script[^>]* src="(\/dashboard\/assets\/[^"]+\.js)"/.exec(indexHtml)?.[1];
  const asset = await fetch(`${base}${script ?? '/dashboard/assets/missing.js'}`);
  t.equal(asset.status, 200, `the app's script ${script ?? '(none in index.html)'} answers`);
  t.match(asset.headers.get('cache-control'), /immutable/, 'with a long cache');

  const top = await docker(['top', name, '-eo', 'pid,uid,args']);
  const processes = top.stdout.trim().split('\n').slice(1);
  t.ok(processes.length > 0, `docker top lists the container's processes:\n${top.stdout}${top.stderr}`);
  t.ok(
    processes.every((line) => line.trim().split(/\s+/)[1] === '10001'),
    `each runs as uid 10001:\n${top.stdout}`,
  );
  t.ok(
    processes.some((line) => line.includes('/usr/bin/node /app/dist/main.js')),
    'the server is node running dist/main.js',
  );

  // docker run passes SIGTERM on to the container: the control plane closes and exits 0.
  await stopsOnSigterm(t, server, name);
  t.notMatch(server.output(), /tsx|ExperimentalWarning/, 'plain node, nothing of tsx');
});

t.test('behavior: with the image’s GF_MIGRATE_ON_START=false the server refuses an unmigrated database, saying to run migrate', async (t) => {
  const { db, url } = await createPostgresTestDatabase(t, { empty: true });
  const started = await docker(['run', '--rm', '--name', containerName(t), '--network', 'host', '-e', `DATABASE_URL=${url!}`, '-e', 'HOST=127.0.0.1', '-e', 'PORT=0', image]);
  t.equal(started.code, 1, 'exits 1');
  t.match(started.stderr, /lacks \d+ migration\(s\).*run `gpufarm-control-plane migrate`/, `the message says to run migrate:\n${started.stderr}`);
  const [table] = await db.query<{ present: boolean }>("SELECT to_regclass('schema_migrations') IS NOT NULL AS present");
  t.notOk(table?.present, 'and it created nothing');
});

t.test('behavior: on the image’s own HOST and PORT, through a published port, with GF_MIGRATE_ON_START=true and the embedded database the user writes in /var/lib/gpufarm', async (t) => {
  const name = containerName(t);
  const server = spawnProcess('control-plane-image', 'docker', ['run', '--name', name, '-p', '127.0.0.1::8080', '-e', 'GF_MIGRATE_ON_START=true', image]);
  t.teardown(() => server.kill());
  await server.waitForOutput(/Server listening at http:\/\/[\d.]+:8080/, 'the listening line on 8080', 90_000);
  const published = await docker(['port', name, '8080/tcp']);
  const address = published.stdout.trim().split('\n')[0] ?? '';
  t.match(address, /^127\.0\.0\.1:\d+$/, `8080 is published on loopback: ${address}`);
  const index = await fetch(`http://${address}/v1`);
  t.equal(index.status, 200, 'GET /v1 answers through it');
  const data = await docker(['exec', name, '/usr/bin/node', '-p', 'require("node:fs").readdirSync("/var/lib/gpufarm").join(" ")']);
  t.match(data.stdout, /\bdb\b/, `the embedded database is in the data folder: ${data.stdout.trim()} ${data.stderr}`);
  await stopsOnSigterm(t, server, name);
});

t.test('error: invalid_config: a malformed variable stops the container at once, naming it', async (t) => {
  const started = await docker(['run', '--rm', '--name', containerName(t), '-e', 'PORT=eighty', '-e', 'GF_LOG_LEVEL=loud', image]);
  t.equal(started.code, 1, 'exits 1');
  t.match(started.stderr, /invalid configuration; fix these environment variables/, `says the configuration is invalid:\n${started.stderr}`);
  t.match(started.stderr, /PORT: .*\(got "eighty"\)/, 'names PORT and its value');
  t.match(started.stderr, /GF_LOG_LEVEL: .*\(got "loud"\)/, 'and GF_LOG_LEVEL');
});
