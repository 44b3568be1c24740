import { execFile } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t, { type Test } from 'tap';
import type { AssignmentOutputRule } from '@gpufarm/shared';
import { collectResults, type CollectOptions } from '../src/artifacts/results.js';
import { CHUNK_BYTES, packOutputRule } from '../src/artifacts/pack.js';
import { uploadArtifact } from '../src/artifacts/upload.js';
import { busyboxSpec, uploadSink, type ReceivedUpload } from './helpers/docker.js';

/**
 * The packer against files a job could leave in its output (made here on the host, as root,
 * which can also make what a container cannot: device nodes): symlinks out of the output at
 * every depth of a rule's path, special files, files that vanish or shrink while packed, files
 * the job's user cannot read. Nothing from outside the output may reach an artifact, and what
 * the job's files break is its own doing (`OutputFilesError`, a note), never an upload retried.
 */

const run = promisify(execFile);
const keys = generateKeyPairSync('ed25519');
const JOB_USER = { uid: 65534, gid: 65534 };
const isRoot = process.getuid?.() === 0;

/** A folder of this test, removed at its end. */
function tempDir(t: Test, prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A file on the host outside any output, with bytes no artifact may hold. */
function hostSecret(t: Test): { dir: string; file: string; bytes: Buffer } {
  const dir = tempDir(t, 'gf-host-secret-');
  const bytes = Buffer.from(`host-secret-${randomBytes(24).toString('hex')}\n`);
  writeFileSync(join(dir, 'secret.txt'), bytes, { mode: 0o644 });
  chmodSync(dir, 0o755);
  return { dir, file: join(dir, 'secret.txt'), bytes };
}

/** Gives a folder tree to the job's user, as `giveOutputTo` gives /output, and the job's own writes would leave it. */
async function giveToJobUser(dir: string): Promise<void> {
  await run('chown', ['-R', '-h', `${JOB_USER.uid}:${JOB_USER.gid}`, dir]);
  chmodSync(dir, 0o755);
}

/** collectResults of `rules` for `outputDir` against a local upload sink. */
async function collect(t: Test, outputDir: string, rules: AssignmentOutputRule[], extra: Partial<CollectOptions> = {}) {
  const sink = await uploadSink(t);
  const logFile = join(tempDir(t, 'gf-log-'), 'log.jsonl');
  writeFileSync(logFile, '');
  const spec = busyboxSpec({ outputRules: rules });
  const results = await collectResults({
    spec,
    exit: { assignmentId: spec.assignmentId, exitCode: 0, oomKilled: false, timedOut: false, canceled: false, outputLimitExceeded: false, startedAt: new Date().toISOString(), finishedAt: new Date().toISOString(), imageDigest: spec.imageDigest! },
    outputDir,
    logFile,
    urlFor: (name) => `${sink.url}/agent/v1/assignments/${spec.assignmentId}/outputs/${name}`,
    machineKey: keys.privateKey,
    upload: { backoffMs: 10 },
    ...extra,
  });
  return { results, received: sink.received };
}

/** The names and link targets in a tar (`tar -tvf`), read with the system's tar. */
async function listing(t: Test, body: Buffer): Promise<string[]> {
  const file = join(tempDir(t, 'gf-tar-'), 'a.tar');
  writeFileSync(file, body);
  const { stdout } = await run('tar', ['-tvf', file]);
  return stdout.trim().split('\n').filter(Boolean).map((l) => l.split(/\s+/).slice(5).join(' '));
}

function holdsNone(t: Test, received: ReceivedUpload[], secrets: Buffer[], what: string): void {
  for (const upload of received) {
    for (const secret of secrets) t.notOk(upload.body.includes(secret), `${upload.path.split('/').at(-1)}: holds no byte of ${what}`);
  }
}

for (const packAs of isRoot ? [null, JOB_USER] : [null]) {
  t.test(`behavior: a symlink at any depth of a rule's path is never followed; nothing outside the output is packed (packed as ${packAs ? 'the job\'s user' : 'the agent'})`, async (t) => {
    const secret = hostSecret(t);
    const out = tempDir(t, 'gf-out-');
    writeFileSync(join(out, 'ok.txt'), 'mine\n');
    symlinkSync('/', join(out, 'x'));
    mkdirSync(join(out, 'a'));
    symlinkSync(secret.dir, join(out, 'a', 'b'));
    symlinkSync(secret.file, join(out, 'final'));
    symlinkSync('/proc/self', join(out, 'self'));
    if (packAs) await giveToJobUser(out);
    const rules = [
      { path: `/output/x${secret.dir}/secret.txt`, maxBytes: 1e6 },
      { path: '/output/a/b/secret.txt', maxBytes: 1e6 },
      { path: '/output/a/b', maxBytes: 1e6 },
      { path: '/output/final', maxBytes: 1e6 },
      { path: '/output/self/environ', maxBytes: 1e6 },
      { path: '/output/x/etc', maxBytes: 1e6 },
      { path: '/output', maxBytes: 1e6 },
    ];
    const { results, received } = await collect(t, out, rules, { packAs });
    holdsNone(t, received, [secret.bytes, Buffer.from(process.env.PATH ?? 'no PATH')], 'the host secret or the packer\'s environment');
    t.same(
      results.outputs.map((o) => [o.path, o.sha256 === null ? 'not stored' : 'stored', o.note?.kind ?? null]),
      [
        [rules[0]!.path, 'not stored', 'unpackable'],
        [rules[1]!.path, 'not stored', 'unpackable'],
        [rules[2]!.path, 'stored', null],
        [rules[3]!.path, 'stored', null],
        [rules[4]!.path, 'not stored', 'unpackable'],
        [rules[5]!.path, 'not stored', 'unpackable'],
        ['/output', 'stored', null],
      ],
    );
    t.equal(results.outputs[0]!.note?.message, `/output/x is a symbolic link; the path of an output rule (${rules[0]!.path}) is never resolved through one`);
    t.equal(results.outputs[1]!.note?.message, `/output/a/b is a symbolic link; the path of an output rule (${rules[1]!.path}) is never resolved through one`);
    t.same(results.notes.map((n) => n.name), ['output-0', 'output-1', 'output-4', 'output-5'], "the report's notes, one per rule not stored");
    const byName = new Map(received.map((r) => [r.path.split('/').at(-1)!, r.body]));
    t.same([...byName.keys()].sort(), ['log', 'output-2', 'output-3', 'output-6'], 'nothing uploaded for the rules through a symlink');
    t.same(await listing(t, byName.get('output-2')!), [`a/b -> ${secret.dir}`], 'a symlink as the last component is archived as a symlink');
    t.same(await listing(t, byName.get('output-3')!), [`final -> ${secret.file}`]);
    t.same(await listing(t, byName.get('output-6')!), ['a', `a/b -> ${secret.dir}`, `final -> ${secret.file}`, 'ok.txt', 'self -> /proc/self', 'x -> /']);
    t.equal(received.filter((r) => r.path.endsWith('/output-0')).length, 0, 'and never retried');
  });
}

t.test('behavior: FIFOs, sockets, device nodes (and names that are not UTF-8) are left out unopened, with a note; packing does not block on a FIFO', { skip: isRoot ? false : 'mknod needs root' }, async (t) => {
  const out = tempDir(t, 'gf-out-');
  writeFileSync(join(out, 'ok.txt'), 'mine\n');
  await run('mkfifo', [join(out, 'fifo')]);
  // A character device as /dev/zero (1:5): read, it would never end.
  await run('mknod', [join(out, 'zero'), 'c', '1', '5']);
  // A name a tar entry cannot carry as it is.
  writeFileSync(Buffer.from(`${out}/f\xff`, 'latin1'), 'bytes\n');
  const socket = createServer();
  await new Promise<void>((resolve) => socket.listen(join(out, 'sock'), resolve));
  t.teardown(() => new Promise<void>((resolve) => socket.close(() => resolve())));
  await giveToJobUser(out);
  const { results, received } = await collect(t, out, [
    { path: '/output', maxBytes: 1e6 },
    { path: '/output/fifo', maxBytes: 1e6 },
  ]);
  t.same(results.notes, [
    { path: '/output', name: 'output-0', kind: 'skipped', message: 'left out /output/fifo (a FIFO), /output/f\uFFFD (a name that is not UTF-8), /output/sock (a socket), /output/zero (a character device): only regular files, folders and symlinks are archived, and nothing else is opened' },
    { path: '/output/fifo', name: 'output-1', kind: 'skipped', message: 'left out /output/fifo (a FIFO): only regular files, folders and symlinks are archived, and nothing else is opened' },
  ]);
  const output = received.find((r) => r.path.endsWith('/output-0'))!;
  t.same(await listing(t, output.body), ['ok.txt'], 'only the regular file is archived');
  t.equal(results.outputs[1]!.sizeBytes, 1024, 'a rule on a FIFO alone is an empty archive');
});

t.test('behavior: a file the job\'s user cannot read leaves its output unstored, with a note; nothing is retried', { skip: isRoot ? false : 'switching users needs root' }, async (t) => {
  const out = tempDir(t, 'gf-out-');
  writeFileSync(join(out, 'ok.txt'), 'mine\n');
  mkdirSync(join(out, 'sub'));
  writeFileSync(join(out, 'sub', 'locked.bin'), 'the job made this unreadable to itself\n');
  await giveToJobUser(out);
  chmodSync(join(out, 'sub', 'locked.bin'), 0o000);
  const { results, received } = await collect(t, out, [
    { path: '/output/ok.txt', maxBytes: 1e6 },
    { path: '/output/sub', maxBytes: 1e6 },
  ]);
  t.ok(results.outputs[0]!.sha256, 'the readable rule is stored');
  t.same(results.outputs[1], { path: '/output/sub', name: 'output-1', sha256: null, sizeBytes: null, exceeded: false, note: { path: '/output/sub', name: 'output-1', kind: 'unpackable', message: "/output/sub/locked.bin cannot be read by the job's user (EACCES)" } });
  t.equal(received.filter((r) => r.path.endsWith('/output-1')).length, 1, 'one attempt: the job\'s own file is not tried again');
});

t.test('behavior: a file that vanishes while packed fails its upload at once with OutputFilesError, never retried', async (t) => {
  const out = tempDir(t, 'gf-out-');
  // Far more than every buffer between the walk and the paused request (streams, tar, TCP), so
  // the walk is still inside big.bin when z.txt goes.
  writeFileSync(join(out, 'big.bin'), Buffer.alloc(64 * CHUNK_BYTES, 7));
  writeFileSync(join(out, 'z.txt'), 'about to vanish\n');
  const sink = await uploadSink(t);
  let requests = 0;
  sink.server.prependListener('request', (req) => {
    requests++;
    req.once('data', () => {
      req.pause();
      unlinkSync(join(out, 'z.txt'));
      req.resume();
    });
  });
  await t.rejects(
    uploadArtifact({ url: `${sink.url}/x`, open: () => packOutputRule(out, { path: '/output', maxBytes: 1e9 }), backoffMs: 10 }),
    { name: 'OutputFilesError', message: '/output/z.txt vanished while it was packed' },
  );
  t.equal(requests, 1, 'one attempt');
});

t.test('behavior: a file that shrinks while packed fails the stream with OutputFilesError', async (t) => {
  const out = tempDir(t, 'gf-out-');
  writeFileSync(join(out, 'big.bin'), Buffer.alloc(64 * CHUNK_BYTES, 7));
  const source = packOutputRule(out, { path: '/output', maxBytes: 1e9 });
  const chunks = source.stream[Symbol.asyncIterator]();
  await chunks.next();
  truncateSync(join(out, 'big.bin'), 0);
  await t.rejects(
    (async () => {
      for (;;) if ((await chunks.next()).done) return;
    })(),
    { name: 'OutputFilesError', message: '/output/big.bin shrank while it was packed' },
  );
  await t.rejects(source.digest, { name: 'OutputFilesError' });
});

t.test(`behavior: folders nested deeper than the packer walks leave the output unstored, with a note`, async (t) => {
  const out = tempDir(t, 'gf-out-');
  let dir = out;
  for (let i = 0; i < 130; i++) {
    dir = join(dir, 'd');
    mkdirSync(dir);
  }
  const { results } = await collect(t, out, [{ path: '/output', maxBytes: 1e6 }], { packAs: null });
  t.equal(results.outputs[0]!.sha256, null);
  t.match(results.notes, [{ kind: 'unpackable', message: /is nested more than 128 folders deep under \/output$/ }]);
});

t.test("behavior: packed as the job's user, a big output gives the same bytes as packed by the agent", { skip: isRoot ? false : 'switching users needs root' }, async (t) => {
  const out = tempDir(t, 'gf-out-');
  writeFileSync(join(out, 'big.bin'), randomBytes(64 * CHUNK_BYTES + 12345));
  await giveToJobUser(out);
  const rule = { path: '/output', maxBytes: 1e9 };
  const drain = async (source: ReturnType<typeof packOutputRule>) => {
    const chunks: Buffer[] = [];
    for await (const c of source.stream) chunks.push(c as Buffer);
    return { bytes: Buffer.concat(chunks), digest: await source.digest };
  };
  const asAgent = await drain(packOutputRule(out, rule));
  const asJob = await drain(packOutputRule(out, rule, undefined, JOB_USER));
  t.ok(asJob.bytes.equals(asAgent.bytes), `the same ${asAgent.bytes.length} tar bytes`);
  t.same(asJob.digest, asAgent.digest);
});
