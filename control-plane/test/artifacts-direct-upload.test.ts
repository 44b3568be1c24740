import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { uploadPlanSchema, type UploadCompletion, type UploadPlan } from '@gpufarm/shared';
import { fileSource, OffThreadPacker, uploadArtifact, UploadError } from '@gpufarm/agent/artifacts';
import t, { type Test } from 'tap';
import { sweepAbandonedUploads } from '../src/artifacts/agent-direct-upload.js';
import { planParts, TARGET_PART_BYTES } from '../src/artifacts/blob-store.js';
import { bearer } from './helpers/app.js';
import { s3rverObjectPath, startS3rver, type S3Server } from './helpers/s3rver.js';
import { uploadPath, uploadSetup, type ArtifactSetup, type Upload } from './helpers/uploads.js';

const sha256 = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');
const MiB = 1024 * 1024;

type Setup = ArtifactSetup & Upload;
type Multipart = Extract<UploadPlan, { method: 'multipart' }>;

/** The control plane's listening socket: every byte it read from any client, whatever the route. */
function countBytesRead(s: Setup): () => number {
  const sockets: Socket[] = [];
  s.app.server.on('connection', (socket: Socket) => sockets.push(socket));
  return () => sockets.reduce((n, socket) => n + socket.bytesRead, 0);
}

const urlOf = (s: Setup, name: string) => `http://127.0.0.1:${s.port}${uploadPath(s, name)}`;
const machine = (s: Setup) => ({ authorization: `Bearer ${s.token}` });

async function askPlan(s: Setup, name: string): Promise<{ status: number; plan: UploadPlan }> {
  const res = await fetch(`${urlOf(s, name)}/uploads`, { method: 'POST', headers: machine(s) });
  return { status: res.status, plan: uploadPlanSchema.parse(await res.json()) };
}

async function multipartPlan(t: Test, s: Setup, name: string): Promise<Multipart> {
  const { status, plan } = await askPlan(s, name);
  t.equal(status, 201, 'the S3 store hands out a multipart plan');
  if (plan.method !== 'multipart') throw new Error('expected a multipart plan');
  // s3rver ignores it, S3 does not: a checksum of the empty body presigned into the URL fails every part.
  t.notOk([...new URL(plan.partUrls[0]!).searchParams.keys()].some((k) => k.startsWith('x-amz-checksum-')), 'no request checksum in the part URLs');
  return plan;
}

async function putPart(url: string, body: Buffer): Promise<string> {
  const res = await fetch(url, { method: 'PUT', body });
  if (!res.ok) throw new Error(`part PUT answered ${res.status}: ${await res.text()}`);
  return res.headers.get('etag')!;
}

async function complete(s: Setup, name: string, plan: Multipart, completion: UploadCompletion): Promise<{ status: number; json: { artifactId?: string; sha256?: string; hashesMatch?: boolean; error?: { code: string; message: string } } }> {
  const res = await fetch(`${urlOf(s, name)}/uploads/${plan.uploadId}`, { method: 'POST', headers: { ...machine(s), 'content-type': 'application/json' }, body: JSON.stringify(completion) });
  return { status: res.status, json: (await res.json()) as never };
}

/** The temp object a plan's parts become (`tmp/<uuid>` in the part URLs' path). */
const tmpKeyOf = (server: S3Server, plan: Multipart) => decodeURIComponent(new URL(plan.partUrls[0]!).pathname).slice(`/${server.bucket}/`.length);

/** Nothing of a refused upload is left: no row, no blob of either hash, no temp object, no upload under way. */
async function assertNothingKept(t: Test, s: Setup, server: S3Server, plan: Multipart, hashes: string[]): Promise<void> {
  const [rows] = await s.db.query<{ n: number }>('SELECT count(*)::int AS n FROM artifacts WHERE assignment_id = $1', [s.assignmentId]);
  t.equal(rows!.n, 0, 'no artifact row');
  for (const hash of hashes) t.equal(await s.blobs.stat(hash), null, `no blob ${hash.slice(0, 8)}…`);
  t.notOk(existsSync(s3rverObjectPath(server, tmpKeyOf(server, plan))), 'the temp object was deleted');
  const [uploads] = await s.db.query<{ n: number }>('SELECT count(*)::int AS n FROM artifact_uploads');
  t.equal(uploads!.n, 0, 'the upload is over');
}

t.test('unit: planParts covers the limit with parts of at least 8 MiB and less than one byte per part more', async (t) => {
  t.same(planParts(100_000), { partBytes: 100_000, partCount: 1 });
  t.same(planParts(TARGET_PART_BYTES), { partBytes: TARGET_PART_BYTES, partCount: 1 });
  for (const maxBytes of [TARGET_PART_BYTES + 1, 20 * MiB, 5 * 1024 * MiB, 200 * 1024 * MiB]) {
    const { partBytes, partCount } = planParts(maxBytes);
    t.ok(partCount * partBytes >= maxBytes && partCount * partBytes < maxBytes + partCount, `${maxBytes}: ${partCount} x ${partBytes}`);
    t.ok(partBytes >= TARGET_PART_BYTES && partCount <= 10_000);
  }
});

t.test('default: with S3 the agent uploads straight to the bucket; the control plane re-reads it and the customer download verifies', async (t) => {
  const server = await startS3rver(t);
  const s = await uploadSetup(t, 'running', [{ path: '/output', maxBytes: 20 * MiB }], server.env);
  const bytesRead = countBytesRead(s);
  const work = mkdtempSync(join(tmpdir(), 'gf-direct-out-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  mkdirSync(join(work, 'output'));
  writeFileSync(join(work, 'output', 'weights.bin'), randomBytes(18 * MiB));
  writeFileSync(join(work, 'job.log'), '{"seq":0,"stream":"stdout","line":"hi"}\n');

  // The daemon's packer: file chunks lent from its worker, released once copied into a part.
  const packer = new OffThreadPacker();
  t.teardown(() => packer.close());
  const output = await uploadArtifact({
    url: urlOf(s, 'output-0'),
    planUrl: `${urlOf(s, 'output-0')}/uploads`,
    headers: machine(s),
    contentType: 'application/x-tar',
    attempts: 1,
    open: () => packer.rule(join(work, 'output'), { path: '/output', maxBytes: 20 * MiB }),
  });
  t.equal(output.status, 201);
  t.ok(output.sizeBytes > 18 * MiB, 'two parts of 10 MiB');
  const log = await uploadArtifact({ url: urlOf(s, 'log'), planUrl: `${urlOf(s, 'log')}/uploads`, headers: machine(s), attempts: 1, open: () => fileSource(join(work, 'job.log')) });
  t.equal(log.status, 201);
  t.ok(bytesRead() < 64 * 1024, `the control plane read ${bytesRead()} bytes in all for ${output.sizeBytes + log.sizeBytes} bytes of artifacts`);

  const rows = await s.db.query<{ id: string; name: string; sha256: string; declared_sha256: string; size_bytes: number }>(
    'SELECT id, name, sha256, declared_sha256, size_bytes FROM artifacts WHERE assignment_id = $1 ORDER BY name',
    [s.assignmentId],
  );
  t.same(rows.map(({ id: _id, ...r }) => ({ ...r, size_bytes: Number(r.size_bytes) })), [
    { name: 'log', sha256: log.sha256, declared_sha256: log.sha256, size_bytes: log.sizeBytes },
    { name: 'output-0', sha256: output.sha256, declared_sha256: output.sha256, size_bytes: output.sizeBytes },
  ]);
  const outputRow = rows.find((r) => r.name === 'output-0')!;
  const meta = await s.app.inject({ method: 'GET', url: `/v1/artifacts/${outputRow.id}`, headers: bearer(s.key) });
  t.equal(meta.statusCode, 302);
  const location = String(meta.headers.location);
  t.ok(location.startsWith(server.endpoint), 'a presigned GET of the bucket');
  const downloaded = Buffer.from(await (await fetch(location)).arrayBuffer());
  t.equal(sha256(downloaded), output.sha256, 'the customer downloads the bytes the agent hashed');
  t.equal(meta.headers['x-artifact-sha256'], output.sha256);
  const [left] = await s.db.query<{ n: number }>('SELECT count(*)::int AS n FROM artifact_uploads');
  t.equal(left!.n, 0, 'completed uploads are no longer under way');
});

t.test('behavior: the filesystem store answers "put" and the agent sends the bytes to the control plane', async (t) => {
  const s = await uploadSetup(t, 'running');
  const { status, plan } = await askPlan(s, 'output-0');
  t.equal(status, 200);
  t.same(plan, { method: 'put' });
  const work = mkdtempSync(join(tmpdir(), 'gf-direct-fs-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  writeFileSync(join(work, 'job.log'), 'a log\n');
  const log = await uploadArtifact({ url: urlOf(s, 'log'), planUrl: `${urlOf(s, 'log')}/uploads`, headers: machine(s), attempts: 1, open: () => fileSource(join(work, 'job.log')) });
  t.equal(log.status, 201);
  t.not(await s.blobs.stat(log.sha256), null);
});

t.test('behavior: an older agent PUTs its bytes to the control plane, which streams them to S3', async (t) => {
  const server = await startS3rver(t);
  const s = await uploadSetup(t, 'running', undefined, server.env);
  const work = mkdtempSync(join(tmpdir(), 'gf-direct-old-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  writeFileSync(join(work, 'job.log'), randomBytes(100_000));
  const log = await uploadArtifact({ url: urlOf(s, 'log'), headers: machine(s), attempts: 1, open: () => fileSource(join(work, 'job.log')) });
  t.equal(log.status, 201);
  const [row] = await s.db.query<{ sha256: string }>("SELECT sha256 FROM artifacts WHERE assignment_id = $1 AND name = 'log'", [s.assignmentId]);
  t.equal(row?.sha256, log.sha256);
  t.ok(existsSync(s3rverObjectPath(server, `blobs/${log.sha256}`)), 'stored in the bucket');
});

t.test('error: bytes that do not hash as declared are refused and nothing is kept', async (t) => {
  const server = await startS3rver(t);
  const s = await uploadSetup(t, 'running', undefined, server.env);

  const wrong = await multipartPlan(t, s, 'output-0');
  const bytes = randomBytes(50_000);
  const etag = await putPart(wrong.partUrls[0]!, bytes);
  const claimed = sha256('other bytes');
  const refused = await complete(s, 'output-0', wrong, { parts: [{ partNumber: 1, etag }], sha256: claimed, sizeBytes: bytes.length });
  t.equal(refused.status, 409);
  t.equal(refused.json.error?.code, 'conflict');
  t.match(refused.json.error?.message, new RegExp(`sha256 ${sha256(bytes)}.*declared ${bytes.length} bytes with sha256 ${claimed}`));
  await assertNothingKept(t, s, server, wrong, [sha256(bytes), claimed]);
  t.equal((await complete(s, 'output-0', wrong, { parts: [{ partNumber: 1, etag }], sha256: sha256(bytes), sizeBytes: bytes.length })).status, 404, 'a refused upload cannot be completed again');

  // The object changed between the agent's upload and its completion: a part sent again with other bytes.
  const changed = await multipartPlan(t, s, 'output-0');
  const first = randomBytes(50_000);
  await putPart(changed.partUrls[0]!, first);
  const second = randomBytes(50_000);
  const etag2 = await putPart(changed.partUrls[0]!, second);
  const overwritten = await complete(s, 'output-0', changed, { parts: [{ partNumber: 1, etag: etag2 }], sha256: sha256(first), sizeBytes: first.length });
  t.equal(overwritten.status, 409);
  await assertNothingKept(t, s, server, changed, [sha256(first), sha256(second)]);

  // The real agent: a refused completion is an upload that failed for good (not retried).
  const lying = await multipartPlan(t, s, 'log');
  const size = await complete(s, 'log', lying, { parts: [{ partNumber: 1, etag: await putPart(lying.partUrls[0]!, bytes) }], sha256: sha256(bytes), sizeBytes: bytes.length + 1 });
  t.equal(size.status, 409, 'a size other than declared is refused before the object is read');
  await assertNothingKept(t, s, server, lying, [sha256(bytes)]);
});

t.test('error: the agent uploader reports a refused completion as a failed upload, not retried', async (t) => {
  const server = await startS3rver(t);
  const s = await uploadSetup(t, 'running', undefined, server.env);
  const work = mkdtempSync(join(tmpdir(), 'gf-direct-lie-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  writeFileSync(join(work, 'job.log'), 'honest bytes\n');
  // A source whose digest lies about its bytes, as a broken or dishonest agent's would.
  const open = () => {
    const source = fileSource(join(work, 'job.log'));
    return { ...source, digest: source.digest.then((d) => ({ ...d, sha256: sha256('dishonest') })) };
  };
  const failed = await uploadArtifact({ url: urlOf(s, 'log'), planUrl: `${urlOf(s, 'log')}/uploads`, headers: machine(s), attempts: 3, backoffMs: 1, open }).catch((err: unknown) => err);
  t.ok(failed instanceof UploadError, String(failed));
  t.equal((failed as UploadError).status, 409);
  t.equal((failed as UploadError).retryable, false);
  t.match((failed as UploadError).message, /not the declared/);
  const [rows] = await s.db.query<{ n: number }>('SELECT count(*)::int AS n FROM artifacts');
  t.equal(rows!.n, 0);
});

t.test('error: the output limit holds on the direct path: the plan covers it, completion and re-read refuse more', async (t) => {
  const server = await startS3rver(t);
  const s = await uploadSetup(t, 'running', [{ path: '/output', maxBytes: 100_000 }], server.env);
  const plan = await multipartPlan(t, s, 'output-0');
  t.equal(plan.partUrls.length, 1);
  t.equal(plan.partBytes, 100_000, 'the plan has no room past the limit');
  t.equal(plan.maxBytes, 100_000);
  const big = randomBytes(150_000);
  const etag = await putPart(plan.partUrls[0]!, big);
  const declaredBig = await complete(s, 'output-0', plan, { parts: [{ partNumber: 1, etag }], sha256: sha256(big), sizeBytes: big.length });
  t.equal(declaredBig.status, 413);
  t.equal(declaredBig.json.error?.code, 'payload_too_large');
  await assertNothingKept(t, s, server, plan, [sha256(big)]);

  const lying = await multipartPlan(t, s, 'output-0');
  const etag2 = await putPart(lying.partUrls[0]!, big);
  const declaredSmall = await complete(s, 'output-0', lying, { parts: [{ partNumber: 1, etag: etag2 }], sha256: sha256(big.subarray(0, 100_000)), sizeBytes: 100_000 });
  t.equal(declaredSmall.status, 413, 'the stored size is read, not taken from the agent');
  await assertNothingKept(t, s, server, lying, [sha256(big)]);

  const extra = await multipartPlan(t, s, 'output-0');
  const parts = await complete(s, 'output-0', extra, { parts: [{ partNumber: 1, etag: 'x' }, { partNumber: 2, etag: 'y' }], sha256: sha256('x'), sizeBytes: 10 });
  t.equal(parts.status, 400, 'parts past the plan are refused');
});

t.test('behavior: uploads never completed are aborted by the sweep; other machines and closed assignments get no plan', async (t) => {
  const server = await startS3rver(t);
  const s = await uploadSetup(t, 'running', undefined, server.env);
  const plan = await multipartPlan(t, s, 'output-0');
  const bytes = randomBytes(10_000);
  const etag = await putPart(plan.partUrls[0]!, bytes);
  t.equal(await sweepAbandonedUploads({ db: s.db, blobs: s.blobs }), 0, 'an upload under way is left alone');
  const later = () => new Date(Date.parse(plan.expiresAt) + 16 * 60 * 1000);
  t.equal(await sweepAbandonedUploads({ db: s.db, blobs: s.blobs, now: later }), 1, 'one past its expiry and grace is aborted');
  const [left] = await s.db.query<{ n: number }>('SELECT count(*)::int AS n FROM artifact_uploads');
  t.equal(left!.n, 0);
  t.equal((await complete(s, 'output-0', plan, { parts: [{ partNumber: 1, etag }], sha256: sha256(bytes), sizeBytes: bytes.length })).status, 404, 'an aborted upload cannot be completed');

  const other = await fetch(`${urlOf(s, 'output-0')}/uploads`, { method: 'POST', headers: { authorization: `Bearer ${s.otherToken}` } });
  t.equal(other.status, 404, "another machine's assignment");
  await s.db.query("UPDATE assignments SET state = 'canceled' WHERE id = $1", [s.assignmentId]);
  t.equal((await fetch(`${urlOf(s, 'output-0')}/uploads`, { method: 'POST', headers: machine(s) })).status, 409, 'a closed assignment takes no uploads');
});
