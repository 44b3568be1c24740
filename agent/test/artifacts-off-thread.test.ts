import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import t, { type Test } from 'tap';
import { OffThreadPacker } from '../src/artifacts/off-thread.js';
import { ArtifactTooLargeError, CHUNK_BYTES, packOutputRule } from '../src/artifacts/pack.js';
import { SHA256_HEADER, uploadArtifact } from '../src/artifacts/upload.js';
import { uploadSink } from './helpers/docker.js';

const run = promisify(execFile);
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function drain(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** An output folder with a file of several chunks and a partial one, a small file, a folder and a symlink. */
function outputFolder(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'gf-offthread-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'big.bin'), randomBytes(3 * CHUNK_BYTES + 12345));
  mkdirSync(join(dir, 'sub'));
  writeFileSync(join(dir, 'sub', 'small.txt'), 'hello\n');
  symlinkSync('small.txt', join(dir, 'sub', 'link'));
  return dir;
}

function packer(t: Test): OffThreadPacker {
  const p = new OffThreadPacker();
  t.teardown(() => p.close());
  return p;
}

t.test('behavior: a rule packed on the worker gives the bytes of the in-thread packer, and its hash', async (t) => {
  const dir = outputFolder(t);
  const p = packer(t);
  const rule = { path: '/output', maxBytes: 64 * CHUNK_BYTES };
  const expected = await drain(packOutputRule(dir, rule).stream);
  // Twice: a chunk moved to this thread must not be one the packer uses again (tar's end block).
  for (const round of [1, 2]) {
    const source = p.rule(dir, rule);
    const bytes = await drain(source.stream);
    const digest = await source.digest;
    t.ok(bytes.equals(expected), `round ${round}: the same tar bytes (${bytes.length})`);
    t.equal(digest.sha256, sha256(bytes), `round ${round}: the worker's hash is the hash of the bytes received`);
    t.equal(digest.sizeBytes, bytes.length);
  }
});

t.test('behavior: a file source and two sources at once', async (t) => {
  const dir = outputFolder(t);
  const p = packer(t);
  const file = join(dir, 'big.bin');
  const [a, b] = [p.file(file), p.rule(dir, { path: '/output/sub', maxBytes: 1e6 })];
  const [bytesA, bytesB] = await Promise.all([drain(a.stream), drain(b.stream)]);
  t.equal((await a.digest).sha256, sha256(bytesA));
  t.equal(bytesA.length, 3 * CHUNK_BYTES + 12345, 'the file as it is');
  t.equal((await b.digest).sha256, sha256(bytesB));
  t.ok(bytesB.equals(await drain(packOutputRule(dir, { path: '/output/sub', maxBytes: 1e6 }).stream)), 'the sub-folder tar');
});

t.test('error: passing maxBytes fails with ArtifactTooLargeError, and no byte past the limit comes out', async (t) => {
  const dir = outputFolder(t);
  const p = packer(t);
  const limit = 2 * CHUNK_BYTES;
  const source = p.rule(dir, { path: '/output', maxBytes: limit });
  let received = 0;
  source.stream.on('data', (c: Buffer) => (received += c.length));
  source.stream.on('error', () => undefined);
  const err = await source.digest.catch((e: unknown) => e);
  t.ok(err instanceof ArtifactTooLargeError, 'the error class crosses the thread');
  t.equal((err as ArtifactTooLargeError).limitBytes, limit);
  t.match((err as Error).message, /\/output is more than its 2097152-byte limit/);
  t.ok(received <= limit, `${received} bytes came out`);
  const missing = p.file(join(dir, 'nope'));
  missing.stream.on('error', () => undefined);
  await t.rejects(missing.digest, /ENOENT/, 'a read error names its cause');
});

t.test('behavior: after a source destroyed halfway the packer goes on serving', async (t) => {
  const dir = outputFolder(t);
  const p = packer(t);
  const first = p.file(join(dir, 'big.bin'));
  await new Promise((resolve) => first.stream.once('data', resolve));
  first.stream.destroy();
  const second = p.file(join(dir, 'sub', 'small.txt'));
  t.equal((await drain(second.stream)).toString(), 'hello\n');
  t.equal((await second.digest).sha256, sha256(Buffer.from('hello\n')));
});

t.test('behavior: an upload from the worker carries the hash of what the server received', async (t) => {
  const dir = outputFolder(t);
  const p = packer(t);
  const upload = await uploadSink(t);
  const result = await uploadArtifact({ url: `${upload.url}/x`, open: () => p.rule(dir, { path: '/output', maxBytes: 64 * CHUNK_BYTES }), backoffMs: 10 });
  const got = upload.received[0]!;
  t.equal(sha256(got.body), result.sha256);
  t.equal(got.trailers[SHA256_HEADER.toLowerCase()], result.sha256);
});

t.test('error: a closed packer fails its open sources', async (t) => {
  const dir = outputFolder(t);
  const p = new OffThreadPacker();
  const source = p.file(join(dir, 'big.bin'));
  source.stream.on('error', () => undefined);
  await p.close();
  await t.rejects(source.digest, /the artifact packer was closed/);
});

t.test('behavior: the worker keeps a process alive while a source is open, and not after', async (t) => {
  const dir = outputFolder(t);
  const script = `
    import { OffThreadPacker } from ${JSON.stringify(new URL('../src/artifacts/off-thread.ts', import.meta.url).href)};
    const source = new OffThreadPacker().file(${JSON.stringify(join(dir, 'big.bin'))});
    source.stream.resume();
    console.log((await source.digest).sha256);
  `;
  // Nothing else holds the event loop: without the worker's ref the digest never comes (exit 13);
  // without its unref the process never ends (the timeout).
  const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { timeout: 30_000 });
  t.equal(stdout.trim(), sha256(readFileSync(join(dir, 'big.bin'))));
});
