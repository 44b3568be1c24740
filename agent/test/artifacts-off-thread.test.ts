import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { OffThreadPacker } from '../src/artifacts/off-thread.js';
import { ArtifactTooLargeError, CHUNK_BYTES, packOutputRule, type ArtifactSource } from '../src/artifacts/pack.js';
import { SHA256_HEADER, uploadArtifact, UploadError } from '../src/artifacts/upload.js';
import { uploadSink } from './helpers/docker.js';

/**
 * Runs a Node script (tsx loaded) and answers what it printed once it ends with code 0. Its
 * work may take long on a busy machine; once it has printed, it must end within
 * `EXIT_AFTER_PRINT_MS`, or something (an open source, a ref'd worker) holds it alive.
 */
const WORK_MS = 180_000;
const EXIT_AFTER_PRINT_MS = 20_000;
function runScript(script: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let failure: Error | null = null;
    const stop = (why: string) => {
      failure ??= new Error(`${why}; it printed ${JSON.stringify(stdout)}, stderr ${JSON.stringify(stderr.slice(-2000))}`);
      child.kill('SIGKILL');
    };
    const work = setTimeout(() => stop(`the script did not print within ${WORK_MS} ms`), WORK_MS);
    let afterPrint: NodeJS.Timeout | undefined;
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      clearTimeout(work);
      afterPrint ??= setTimeout(() => stop(`the script printed but did not end within ${EXIT_AFTER_PRINT_MS} ms`), EXIT_AFTER_PRINT_MS);
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.once('error', (err) => stop(`the script could not run: ${err.message}`));
    child.once('exit', (code, signal) => {
      clearTimeout(work);
      clearTimeout(afterPrint);
      if (failure) reject(failure);
      else if (code !== 0) reject(new Error(`the script ended with ${code ?? signal}; it printed ${JSON.stringify(stdout)}, stderr ${JSON.stringify(stderr.slice(-2000))}`));
      else resolve(stdout);
    });
  });
}
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** All of a source's bytes; lent chunks are copied, then released. */
async function drain(source: ArtifactSource): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of source.stream) {
    chunks.push(Buffer.from(c as Buffer));
    source.release?.(c as Buffer);
  }
  return Buffer.concat(chunks);
}

/** Chunks of big.bin: more than a source's lent memory holds, so its slots are used again. */
const BIG_CHUNKS = 24;

/** An output folder with a file of many chunks and a partial one, a small file, a folder and a symlink. */
function outputFolder(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'gf-offthread-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'big.bin'), randomBytes(BIG_CHUNKS * CHUNK_BYTES + 12345));
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
  const expected = await drain(packOutputRule(dir, rule));
  // Twice: a chunk moved to this thread must not be one the packer uses again (tar's end block).
  for (const round of [1, 2]) {
    const source = p.rule(dir, rule);
    const bytes = await drain(source);
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
  const [bytesA, bytesB] = await Promise.all([drain(a), drain(b)]);
  t.equal((await a.digest).sha256, sha256(bytesA));
  t.equal(bytesA.length, BIG_CHUNKS * CHUNK_BYTES + 12345, 'the file as it is');
  t.equal((await b.digest).sha256, sha256(bytesB));
  t.ok(bytesB.equals(await drain(packOutputRule(dir, { path: '/output/sub', maxBytes: 1e6 }))), 'the sub-folder tar');
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
  t.equal((await drain(second)).toString(), 'hello\n');
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

t.test('behavior: a source sends only a few chunks not yet released, and goes on once they are', async (t) => {
  const dir = outputFolder(t);
  const p = packer(t);
  const file = join(dir, 'big.bin');
  const source = p.file(file);
  const held: Buffer[] = [];
  source.stream.on('data', (c: Buffer) => held.push(c));
  // Once chunks come (the worker starts first), wait until no more come for a while.
  const pause = () => new Promise((resolve) => setTimeout(resolve, 300));
  while (held.length === 0) await pause();
  for (let seen = -1; seen !== held.length; ) {
    seen = held.length;
    await pause();
  }
  t.ok(held.length < BIG_CHUNKS, `the source stopped after ${held.length} chunks, none released`);
  const bytes: Buffer[] = [];
  const keep = (c: Buffer) => {
    bytes.push(Buffer.from(c));
    source.release?.(c);
  };
  held.splice(0).forEach(keep);
  source.stream.removeAllListeners('data');
  source.stream.on('data', keep);
  await source.digest;
  t.ok(Buffer.concat(bytes).equals(readFileSync(file)), 'then the rest, and every byte is right');
});

t.test('behavior: a lent chunk goes back only once the socket took it (a slow server)', async (t) => {
  const dir = outputFolder(t);
  const p = packer(t);
  const rule = { path: '/output', maxBytes: 64 * CHUNK_BYTES };
  const received: Buffer[] = [];
  // Pauses every 2 MiB, so the socket fills and writes wait in the client's queue.
  const server = createServer((req, res) => {
    let sincePause = 0;
    req.on('data', (c: Buffer) => {
      received.push(c);
      sincePause += c.length;
      if (sincePause < 2 * CHUNK_BYTES) return;
      sincePause = 0;
      req.pause();
      setTimeout(() => req.resume(), 20);
    });
    req.on('end', () => res.writeHead(201).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as { port: number };
  const result = await uploadArtifact({ url: `http://127.0.0.1:${port}/x`, open: () => p.rule(dir, rule), attempts: 1 });
  const body = Buffer.concat(received);
  t.equal(sha256(body), result.sha256, 'the server got the bytes the worker hashed');
  t.ok(body.equals(await drain(packOutputRule(dir, rule))), 'the bytes of the in-thread packer');
});

t.test('behavior: a source cut short by an early answer is closed, and the process can end', async (t) => {
  const dir = outputFolder(t);
  const file = join(dir, 'big.bin');
  let requests = 0;
  // The first attempt is answered 503 as soon as it starts; the retry is answered at its end.
  const server = createServer((req, res) => {
    req.resume();
    if (++requests === 1) res.writeHead(503).end();
    else req.on('end', () => res.writeHead(201).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as { port: number };
  const script = `
    import { OffThreadPacker } from ${JSON.stringify(new URL('../src/artifacts/off-thread.ts', import.meta.url).href)};
    import { uploadArtifact } from ${JSON.stringify(new URL('../src/artifacts/upload.ts', import.meta.url).href)};
    const packer = new OffThreadPacker();
    const done = await uploadArtifact({ url: 'http://127.0.0.1:${port}/x', open: () => packer.file(${JSON.stringify(file)}), backoffMs: 10 });
    console.log(done.attempts, done.sha256);
  `;
  // A first source left open would keep the worker, and so the process, alive after it printed.
  const stdout = await runScript(script);
  t.equal(stdout.trim(), `2 ${sha256(readFileSync(file))}`, 'the retry went through, then the process ended');
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
    source.stream.on('data', (chunk) => source.release(chunk));
    console.log((await source.digest).sha256);
  `;
  // Nothing else holds the event loop: without the worker's ref the digest never comes (exit 13);
  // without its unref the process does not end after it printed.
  const stdout = await runScript(script);
  t.equal(stdout.trim(), sha256(readFileSync(join(dir, 'big.bin'))));
});

t.test('behavior: an upload made whole on the worker sends the in-thread packer\'s bytes with their hash, retries, and its errors cross the thread', async (t) => {
  const dir = outputFolder(t);
  const p = packer(t);
  const rule = { path: '/output', maxBytes: 64 * CHUNK_BYTES };
  // One 503 first: the worker retries as uploadArtifact does.
  const upload = await uploadSink(t, { failFirst: 1 });
  const result = await p.upload({ kind: 'rule', outputDir: dir, rule }, { url: `${upload.url}/x`, backoffMs: 1 });
  t.equal(result.attempts, 2);
  const got = upload.received.at(-1)!;
  t.ok(got.body.equals(await drain(packOutputRule(dir, rule))), 'the bytes of the in-thread packer (its buffers were read into again and again)');
  t.equal(sha256(got.body), result.sha256);
  t.equal(got.trailers[SHA256_HEADER.toLowerCase()], result.sha256);
  const file = await p.upload({ kind: 'file', path: join(dir, 'big.bin'), limitBytes: 64 * CHUNK_BYTES }, { url: `${upload.url}/y` });
  t.equal(file.sha256, sha256(readFileSync(join(dir, 'big.bin'))));

  const tooLarge = await p.upload({ kind: 'rule', outputDir: dir, rule: { path: '/output', maxBytes: CHUNK_BYTES } }, { url: `${upload.url}/z` }).catch((e: unknown) => e);
  t.ok(tooLarge instanceof ArtifactTooLargeError, String(tooLarge));
  const refused = await uploadSink(t, { maxBytes: 2 });
  const failed = await p.upload({ kind: 'file', path: join(dir, 'sub', 'small.txt'), limitBytes: 1000 }, { url: `${refused.url}/x` }).catch((e: unknown) => e);
  t.ok(failed instanceof UploadError, String(failed));
  t.equal((failed as UploadError).status, 413);
  t.equal((failed as UploadError).retryable, false);
});

t.test('behavior: a rule of many files does not run out of read buffers (the read at each file end gives its buffer back)', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gf-offthread-many-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (let i = 0; i < 40; i++) writeFileSync(join(dir, `f${String(i).padStart(2, '0')}.txt`), `file ${i}\n`);
  const p = packer(t);
  const rule = { path: '/output', maxBytes: 1e6 };
  const expected = await drain(packOutputRule(dir, rule));
  const source = p.rule(dir, rule);
  t.ok((await drain(source)).equals(expected), 'the lent source packs all 40 files');
  const upload = await uploadSink(t);
  const result = await p.upload({ kind: 'rule', outputDir: dir, rule }, { url: `${upload.url}/x`, attempts: 1 });
  t.ok(upload.received[0]!.body.equals(expected), 'and so does an upload on the worker');
  t.equal(result.sha256, sha256(expected));
});
