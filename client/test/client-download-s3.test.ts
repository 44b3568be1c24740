import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import t from 'tap';
import { createS3Client, S3_BLOB_PREFIX } from '@gpufarm/control-plane/artifacts';
import { s3rverObjectPath, startS3rver } from '@gpufarm/control-plane/testing/s3rver';
import { artifactSetup } from '@gpufarm/control-plane/testing/uploads';
import { createClient } from '../src/index.js';
import { failure, listening } from './helpers/control-plane.js';

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** A control plane storing artifacts in a real s3rver process, and the SDK pointed at it. */
async function setup(t: Teardown) {
  const server = await startS3rver(t);
  const s = await listening((env) => artifactSetup(t, { ...env, ...server.env }));
  const gf = createClient({ baseUrl: s.baseUrl, apiKey: s.key });
  const out = mkdtempSync(join(tmpdir(), 'gf-sdk-s3-download-'));
  t.teardown(() => rmSync(out, { recursive: true, force: true }));
  return { ...s, server, gf, out };
}

t.test('default: GET /v1/artifacts/:id redirects to a presigned S3 GET (120 s) and downloadArtifact verifies the bytes', async (t) => {
  const { gf, out, server, baseUrl, key } = await setup(t);
  const bytes = Buffer.from('bytes kept in the bucket '.repeat(8192));
  const uploaded = await gf.artifacts.upload(bytes, { filename: 'weights.bin' });
  t.equal(uploaded.sha256, sha256(bytes));
  t.ok(statSync(s3rverObjectPath(server, `${S3_BLOB_PREFIX}${uploaded.sha256}`)).size === bytes.length, 's3rver holds the bytes under their hash');

  const before = Date.now();
  const answer = await fetch(`${baseUrl}/v1/artifacts/${uploaded.id}`, { headers: { authorization: `Bearer ${key}` }, redirect: 'manual' });
  t.equal(answer.status, 302);
  t.equal(answer.headers.get('x-artifact-sha256'), sha256(bytes));
  t.equal(answer.headers.get('x-artifact-size'), String(bytes.length));
  const location = new URL(answer.headers.get('location')!);
  t.equal(location.origin, server.endpoint, 'the bytes come from the bucket, not the control plane');
  t.equal(location.pathname, `/${server.bucket}/${S3_BLOB_PREFIX}${uploaded.sha256}`);
  t.equal(location.searchParams.get('X-Amz-Expires'), '120');
  const direct = await fetch(location);
  t.equal(direct.status, 200);
  t.equal(direct.headers.get('content-disposition'), 'attachment; filename="weights.bin"', 'saved under the artifact\'s filename');
  t.equal(sha256(Buffer.from(await direct.arrayBuffer())), sha256(bytes));

  const metadata = await fetch(`${baseUrl}/v1/artifacts/${uploaded.id}?format=json`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.json() as Promise<{ url: string; urlExpiresAt: string }>);
  t.ok(metadata.url.startsWith(`${server.endpoint}/${server.bucket}/`), 'the JSON url is the presigned one too');
  const lifetime = Date.parse(metadata.urlExpiresAt) - before;
  t.ok(lifetime > 115_000 && lifetime <= 121_000, `urlExpiresAt is 120 s out (${lifetime} ms)`);

  const dest = join(out, 'weights.bin');
  const result = await gf.downloadArtifact(uploaded.id, dest, { expectedSha256: sha256(bytes) });
  t.same(result, { path: dest, sha256: sha256(bytes), sizeBytes: bytes.length });
  t.equal(sha256(readFileSync(dest)), sha256(bytes));
  t.same(readdirSync(out), ['weights.bin'], 'no temporary file left');
});

t.test('error: integrity_error for an object changed in the bucket, and no file at the destination', async (t) => {
  const { gf, out, server } = await setup(t);
  const bytes = Buffer.from('the recorded bytes '.repeat(4000));
  const uploaded = await gf.artifacts.upload(bytes);
  const dest = join(out, 'result.bin');

  // Bytes flipped in s3rver's storage folder: the same size, another hash.
  const onDisk = s3rverObjectPath(server, `${S3_BLOB_PREFIX}${uploaded.sha256}`);
  const flipped = Buffer.from(bytes);
  flipped[100] = flipped[100]! ^ 0xff;
  writeFileSync(onDisk, flipped);
  const corrupted = await failure(gf.downloadArtifact(uploaded.id, dest));
  t.equal(corrupted.code, 'integrity_error');
  t.ok(corrupted.details.some((d) => d.message.includes(sha256(flipped))), 'details give the hash that arrived');
  t.notOk(existsSync(dest), 'nothing at the destination');
  t.same(readdirSync(out), [], 'no temporary file left');

  // The object overwritten through the S3 API with other (shorter) bytes.
  const client = createS3Client(server.config);
  t.teardown(() => client.destroy());
  const other = Buffer.from('not what was recorded');
  await client.send(new PutObjectCommand({ Bucket: server.bucket, Key: `${S3_BLOB_PREFIX}${uploaded.sha256}`, Body: other }));
  const overwritten = await failure(gf.downloadArtifact(uploaded.id, dest));
  t.equal(overwritten.code, 'integrity_error');
  t.ok(overwritten.details.some((d) => d.message.includes(sha256(other))));
  t.ok(overwritten.details.some((d) => d.field === 'X-Artifact-Size'), 'the size differs too');
  t.notOk(existsSync(dest));
  t.same(readdirSync(out), []);

  await client.send(new PutObjectCommand({ Bucket: server.bucket, Key: `${S3_BLOB_PREFIX}${uploaded.sha256}`, Body: bytes }));
  t.equal((await gf.downloadArtifact(uploaded.id, dest)).sha256, sha256(bytes), 'the recorded bytes put back download again');
});
