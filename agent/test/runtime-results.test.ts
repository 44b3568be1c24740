import { execFile } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { collectResults } from '../src/artifacts/results.js';
import { packOutputRule } from '../src/artifacts/pack.js';
import { SHA256_HEADER, uploadArtifact, UploadError } from '../src/artifacts/upload.js';
import { canonicalJson } from '@gpufarm/shared';
import { argvSha256, canaryResult, signRecord, verifyRecord } from '@gpufarm/shared/node';
import { busyboxSpec, collectLines, localImages, testRuntime, uploadSink } from './helpers/docker.js';

const run = promisify(execFile);
const keys = generateKeyPairSync('ed25519');

/** sha256sum of bytes written to a file: a hash computed outside the agent's code. */
async function sha256sum(bytes: Buffer): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'gf-sum-'));
  const file = join(dir, 'blob');
  writeFileSync(file, bytes);
  const { stdout } = await run('sha256sum', [file]);
  await run('rm', ['-rf', dir]);
  return stdout.slice(0, 64);
}

t.test('behavior: the canary outputs and the log are uploaded with hashes equal to sha256sum; the record verifies', async (t) => {
  const images = localImages();
  const runtime = testRuntime(t);
  const { sink } = collectLines();
  const spec = busyboxSpec({
    image: images.canary.repository,
    imageDigest: images.canary.digest,
    command: ['sha256-chain', '1000'],
    outputRules: [
      { path: '/output/result.txt', maxBytes: 4096 },
      { path: '/output', maxBytes: 64 * 1024 },
    ],
  });
  const job = await runtime.start(spec, sink);
  const exit = await job.done;
  t.equal(exit.exitCode, 0);
  const upload = await uploadSink(t);
  const results = await collectResults({
    spec,
    exit,
    outputDir: job.outputDir,
    logFile: job.logFile,
    urlFor: (name) => `${upload.url}/agent/v1/assignments/${spec.assignmentId}/outputs/${name}`,
    headers: { authorization: 'Bearer gfa_test' },
    machineKey: keys.privateKey,
  });
  t.same(upload.received.map((u) => u.path.split('/').at(-1)), ['output-0', 'output-1', 'log']);
  for (const [i, got] of upload.received.entries()) {
    const independent = await sha256sum(got.body);
    const expected = i < 2 ? results.outputs[i]!.sha256 : results.log.sha256;
    t.equal(independent, expected, `${got.path}: the agent's hash equals sha256sum of the bytes received`);
    t.equal(got.trailers[SHA256_HEADER.toLowerCase()], independent, `${got.path}: the trailer carries it`);
    t.equal(got.headers.authorization, 'Bearer gfa_test');
  }
  // The tar holds what the canary wrote, named relative to /output.
  const dir = mkdtempSync(join(tmpdir(), 'gf-untar-'));
  t.teardown(() => run('rm', ['-rf', dir]));
  writeFileSync(join(dir, 'a.tar'), upload.received[0]!.body);
  const { stdout: listing } = await run('tar', ['-tf', join(dir, 'a.tar')]);
  t.same(listing.trim().split('\n'), ['result.txt']);
  const { stdout: content } = await run('tar', ['-xOf', join(dir, 'a.tar'), 'result.txt']);
  t.equal(content, canaryResult(spec.jobId, 1000));
  // The log artifact holds the job's lines.
  const logLines = upload.received[2]!.body.toString('utf8').trim().split('\n').map((l) => JSON.parse(l) as { stream: string; line: string });
  t.ok(logLines.some((l) => l.stream === 'stderr' && l.line.startsWith('sha256-chain: 1000 iterations')));

  // The record: what ran, signed; verifies with the public key, a tampered copy does not.
  const record = verifyRecord(results.signed, keys.publicKey.export({ type: 'spki', format: 'pem' }) as string);
  t.ok(record, 'the signed record verifies with the public key');
  t.equal(record!.imageDigest, images.canary.digest);
  t.equal(record!.argvSha256, argvSha256(['sha256-chain', '1000']));
  t.equal(record!.exitCode, 0);
  t.same(record!.outputs.map((o) => o.sha256), results.outputs.map((o) => o.sha256));
  t.equal(record!.log!.sha256, results.log.sha256);
  const tampered = { ...results.signed, json: results.signed.json.replace('"exitCode":0', '"exitCode":1') };
  t.not(tampered.json, results.signed.json);
  t.equal(verifyRecord(tampered, keys.publicKey), null, 'a tampered record does not verify');
  t.equal(verifyRecord(results.signed, generateKeyPairSync('ed25519').publicKey), null, 'another machine key does not verify');
});

t.test('behavior: uploads retry with backoff after a 503 and send the known hash up front', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gf-out-'));
  t.teardown(() => run('rm', ['-rf', dir]));
  writeFileSync(join(dir, 'a.txt'), 'a'.repeat(10000));
  const upload = await uploadSink(t, { failFirst: 1 });
  const result = await uploadArtifact({ url: `${upload.url}/x`, open: () => packOutputRule(dir, { path: '/output', maxBytes: 1e6 }), backoffMs: 10 });
  t.equal(result.attempts, 2);
  t.equal(upload.received.length, 2);
  t.equal(upload.received[1]!.headers[SHA256_HEADER.toLowerCase()], result.sha256, 'the retry carries the hash as a header');
  t.equal(await sha256sum(upload.received[1]!.body), result.sha256);
  t.same(upload.received[0]!.body, upload.received[1]!.body, 'packing again gives the same bytes');
});

t.test('error: a 4xx answer is not retried', async (t) => {
  const upload = await uploadSink(t);
  upload.server.removeAllListeners('request');
  upload.server.on('request', (_req, res) => res.writeHead(403).end());
  const dir = mkdtempSync(join(tmpdir(), 'gf-out-'));
  t.teardown(() => run('rm', ['-rf', dir]));
  await t.rejects(uploadArtifact({ url: `${upload.url}/x`, open: () => packOutputRule(dir, { path: '/output', maxBytes: 1e6 }), backoffMs: 10 }), UploadError);
});

t.test('behavior: a tar passing maxBytes is cut before the limit', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gf-out-'));
  t.teardown(() => run('rm', ['-rf', dir]));
  // Content under the limit, but headers push the tar over it: caught while streaming.
  for (let i = 0; i < 20; i++) writeFileSync(join(dir, `f${i}`), 'x');
  const upload = await uploadSink(t);
  await t.rejects(uploadArtifact({ url: `${upload.url}/x`, open: () => packOutputRule(dir, { path: '/output', maxBytes: 4096 }), backoffMs: 10 }), { name: 'ArtifactTooLargeError' });
  for (const r of upload.received) t.ok(r.body.length <= 4096, `received ${r.body.length} bytes`);
});

t.test('args: canonical JSON and signatures', async (t) => {
  t.equal(canonicalJson({ b: 1, a: [true, null, 'x'], c: { z: 1, y: 2 } }), '{"a":[true,null,"x"],"b":1,"c":{"y":2,"z":1}}');
  t.throws(() => canonicalJson({ a: 1.5 }));
  const record = {
    version: 1 as const,
    assignmentId: 'a',
    jobId: 'j',
    imageDigest: `sha256:${'0'.repeat(64)}`,
    argvSha256: argvSha256([]),
    startedAt: '2026-01-01T00:00:00Z',
    finishedAt: '2026-01-01T00:00:01Z',
    exitCode: 0,
    oomKilled: false,
    timedOut: false,
    outputs: [],
    log: null,
  };
  const signed = signRecord(record, keys.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string);
  t.same(verifyRecord(signed, keys.publicKey), record);
  t.equal(verifyRecord({ ...signed, json: JSON.stringify(record, null, 1) }, keys.publicKey), null, 'non-canonical text is refused');
});
