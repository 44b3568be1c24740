import { createHash, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import tar from 'tar-stream';
import t, { type Test } from 'tap';
import { OUTPUT_FILES_MAX, outputFileListSchema, type OutputFileList } from '@gpufarm/shared';
import { createFsBlobStore } from '../src/artifacts/fs-blob-store.js';
import { newArtifactId } from '../src/artifacts/metadata.js';
import { indexOutputArtifact, indexTar, safeMemberPath } from '../src/artifacts/output-index.js';
import { insertArtifact, type ArtifactRow } from '../src/artifacts/store.js';
import { bearer, createTestKey } from './helpers/app.js';
import { assertError } from './helpers/assert.js';
import { artifactSetup, type ArtifactSetup } from './helpers/uploads.js';
import { devWallet, fakeWebDist, PUBLIC_URL, session, signIn, type SignedIn } from './helpers/web.js';

/**
 * The file list of a job's output tar: indexed from the stored bytes (as settlement does it),
 * kept in PostgreSQL, listed and served one file at a time by the dashboard's job routes and
 * `GET /v1/artifacts/:id/files[/:index]`, each file checked against its indexed hash. Hostile
 * tars (names that climb out, links, floods of entries, bytes that are no tar) are listed safely.
 */

const sha256 = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');

type Entry = { name: string; body?: string | Buffer; type?: 'file' | 'directory' | 'symlink' | 'link' | 'fifo' | 'character-device'; linkname?: string };

/** A tar of `entries` in order, as a machine may send it (any names, any types). */
async function tarOf(entries: readonly Entry[]): Promise<Buffer> {
  const pack = tar.pack();
  for (const e of entries) {
    const type = e.type ?? 'file';
    if (type === 'file') pack.entry({ name: e.name }, e.body ?? '');
    else pack.entry({ name: e.name, type, ...(e.linkname ? { linkname: e.linkname } : {}) });
  }
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of pack) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

const LONG = `deep/${'n'.repeat(150)}/weights.bin`;
const FILES: Entry[] = [
  { name: './', type: 'directory' },
  { name: './result.txt', body: 'done\n' },
  { name: './logs/', type: 'directory' },
  { name: './logs/naïve run #1.txt', body: 'a'.repeat(10_000) },
  { name: LONG, body: randomBytes(70_000) },
  { name: './empty.txt', body: '' },
];

t.test('default: indexTar lists each regular file with its size, hash and where its bytes start', async (t) => {
  const bytes = await tarOf(FILES);
  const index = await indexTar(Readable.from([bytes]));
  t.equal(index.state, 'indexed');
  t.equal(index.tarSha256, sha256(bytes), 'the hash of all the bytes read');
  t.same(
    index.files.map((f) => f.path),
    ['result.txt', 'logs/naïve run #1.txt', LONG, 'empty.txt'],
    'regular files in tar order, leading ./ dropped, folders implied, a long (pax) name whole',
  );
  for (const [i, file] of index.files.entries()) {
    const body = FILES.filter((e) => (e.type ?? 'file') === 'file')[i]!.body!;
    t.equal(file.sizeBytes, Buffer.byteLength(body), `${file.path}: size`);
    t.equal(file.sha256, sha256(body), `${file.path}: hash`);
    t.equal(sha256(bytes.subarray(file.dataOffset, file.dataOffset + file.sizeBytes)), file.sha256, `${file.path}: its bytes are at dataOffset`);
  }
  t.equal(index.fileCount, 4);
  t.same(index.skipped, { links: 0, other: 0, unsafeNames: 0 });
});

t.test('behavior: hostile tars: names that climb out or hold control characters, links and devices are never listed; a flood of entries is bounded', async (t) => {
  const hostile = await tarOf([
    { name: '/etc/passwd', body: 'root' },
    { name: '../../outside.txt', body: 'x' },
    { name: 'ok/../../../outside.txt', body: 'x' },
    { name: 'bad\nname.txt', body: 'x' },
    { name: 'shadow', type: 'symlink', linkname: '/etc/shadow' },
    { name: 'hard', type: 'link', linkname: 'safe.txt' },
    { name: 'pipe', type: 'fifo' },
    { name: 'safe.txt', body: 'safe' },
    { name: 'a..b/c..txt', body: 'dots are fine inside a name' },
  ]);
  const index = await indexTar(Readable.from([hostile]));
  t.same(index.files.map((f) => f.path), ['safe.txt', 'a..b/c..txt'], 'only safe regular files are listed');
  t.same(index.skipped, { links: 2, other: 1, unsafeNames: 4 }, 'the rest counted by kind');
  t.equal(index.fileCount, 2);
  for (const name of ['/x', '../x', 'a/../../x', '..', './', '', 'tab\tname', `${'a'.repeat(4097)}`]) t.equal(safeMemberPath(name), null, `${JSON.stringify(name.slice(0, 20))} is unsafe`);
  t.equal(safeMemberPath('././a/b/'), 'a/b');

  const flood = await tarOf(Array.from({ length: OUTPUT_FILES_MAX + 150 }, (_, i) => ({ name: `f/${i}.txt`, body: String(i) })));
  const bounded = await indexTar(Readable.from([flood]));
  t.equal(bounded.files.length, OUTPUT_FILES_MAX, `the first ${OUTPUT_FILES_MAX} files are listed`);
  t.equal(bounded.fileCount, OUTPUT_FILES_MAX + 150, 'all of them counted');
  t.equal(bounded.files.at(-1)!.path, `f/${OUTPUT_FILES_MAX - 1}.txt`);
  t.equal(bounded.tarSha256, sha256(flood), 'read to its end');
});

t.test('error: bytes that are no tar, or a tar cut short, are unreadable; a failing store throws', async (t) => {
  const garbage = await indexTar(Readable.from([randomBytes(4096)]));
  t.equal(garbage.state, 'unreadable');
  t.match(garbage.reason, /^not a tar the server can read: /);
  t.same(garbage.files, []);
  const whole = await tarOf([{ name: 'big.bin', body: randomBytes(5000) }]);
  const cut = await indexTar(Readable.from([whole.subarray(0, 2048)]));
  t.equal(cut.state, 'unreadable', 'a tar cut inside an entry');
  const failing = new Readable({
    read() {
      this.destroy(new Error('disk gone'));
    },
  });
  await t.rejects(indexTar(failing), { name: 'OutputReadError', message: /disk gone/ }, 'a read failure is not the tar’s fault: nothing to record');
});

interface Fixture extends ArtifactSetup {
  customer: SignedIn;
  jobId: string;
  /** Stores `bytes` as the job's result output (the row, the job's hash and output id, as settlement writes them) and indexes it. */
  settleOutput(bytes: Buffer, options?: { index?: boolean }): Promise<ArtifactRow>;
  list(path: string, headers?: Record<string, string>): Promise<OutputFileList>;
}

async function setup(t: Test): Promise<Fixture> {
  const s = await artifactSetup(t, { GF_PUBLIC_URL: PUBLIC_URL, GF_WEB_DIR: fakeWebDist(t) });
  const customer = await signIn(s.app, devWallet(1));
  // The key of the same wallet is of the same account: /v1 and the dashboard see the same artifacts.
  const key = await createTestKey(s.db, { walletAddress: customer.address.toLowerCase() });
  const created = await s.app.inject({ method: 'POST', url: '/dashboard/api/v1/jobs', headers: session(customer, { csrf: true }), payload: { image: 'ghcr.io/acme/job:1', gpu: { count: 1 }, maxPricePerGpuHour: '1.00' } });
  if (created.statusCode !== 201) throw new Error(`job creation answered ${created.statusCode}: ${created.body}`);
  const jobId = created.json().job.id as string;
  const settleOutput = async (bytes: Buffer, options: { index?: boolean } = {}) => {
    const stored = await s.blobs.put(Readable.from([bytes]), { maxBytes: 1 << 24 });
    const row = await insertArtifact(s.db, { id: newArtifactId(), accountId: key.accountId, jobId, assignmentId: null, kind: 'output', name: 'output-0', filename: `${jobId}-output-0.tar`, sizeBytes: stored.sizeBytes, sha256: stored.sha256, declaredSha256: stored.sha256, ttlDays: 30 });
    await s.db.query('UPDATE jobs SET output_artifact_id = $2, server_hash = $3 WHERE id = $1', [jobId, row.id, row.sha256]);
    if (options.index !== false) await indexOutputArtifact(s, row);
    return row;
  };
  const list = async (path: string, headers: Record<string, string> = session(customer)) => {
    const res = await s.app.inject({ url: path, headers });
    if (res.statusCode !== 200) throw new Error(`${path} answered ${res.statusCode}: ${res.body}`);
    t.equal(res.headers['cache-control'], 'no-store', `${path}: not cached`);
    return outputFileListSchema.parse(res.json());
  };
  return { ...s, key: key.key, accountId: key.accountId, customer, jobId, settleOutput, list };
}

t.test('default: the job page lists its output’s files and serves each one with its hash; /v1 serves the same', async (t) => {
  const s = await setup(t);
  const bytes = await tarOf([...FILES, { name: 'link', type: 'symlink', linkname: '/etc/passwd' }, { name: '../escape', body: 'x' }]);
  const row = await s.settleOutput(bytes);
  const list = await s.list(`/dashboard/api/jobs/${s.jobId}/output/files`);
  t.match(list, { object: 'output_files', artifactId: row.id, jobId: s.jobId, tarSha256: sha256(bytes), state: 'indexed', reason: null, fileCount: 4, skipped: { links: 1, other: 0, unsafeNames: 1 } });
  t.same(list.files.map((f) => [f.index, f.path]), [[0, 'result.txt'], [1, 'logs/naïve run #1.txt'], [2, LONG], [3, 'empty.txt']]);
  t.same(await s.list(`/v1/artifacts/${row.id}/files`, bearer(s.key)), list, 'GET /v1/artifacts/:id/files lists the same, with an API key');

  for (const file of list.files) {
    for (const url of [`/dashboard/api/jobs/${s.jobId}/output/files/${file.index}`, `/v1/artifacts/${row.id}/files/${file.index}`]) {
      const res = await s.app.inject({ url, headers: url.startsWith('/v1') ? bearer(s.key) : session(s.customer) });
      t.equal(res.statusCode, 200, `${url}: 200`);
      t.equal(sha256(res.rawPayload), file.sha256, `${url}: the bytes hash as listed`);
      t.equal(res.headers['x-artifact-sha256'], file.sha256);
      t.equal(res.headers['content-length'], String(file.sizeBytes));
      t.equal(res.headers['content-type'], 'application/octet-stream');
    }
  }
  const named = await s.app.inject({ url: `/dashboard/api/jobs/${s.jobId}/output/files/1`, headers: session(s.customer) });
  t.equal(named.headers['content-disposition'], `attachment; filename="na_ve_run__1.txt"; filename*=UTF-8''${encodeURIComponent('naïve run #1.txt')}`, 'the base name, ASCII-safe and in UTF-8');
  t.equal(named.headers['x-ratelimit-limit'], '120', 'counted as an artifact download');

  await indexOutputArtifact(s, row);
  const [{ n }] = (await s.db.query<{ n: number }>('SELECT count(*)::int AS n FROM output_index_files WHERE artifact_id = $1', [row.id])) as [{ n: number }];
  t.equal(n, 4, 'indexing again (settlement retried) keeps one list');
});

t.test('behavior: a file whose stored bytes changed under the index is never served whole', async (t) => {
  const s = await setup(t);
  // Over the store's 1 MiB reads: bytes go out before the last chunk is checked.
  const big = randomBytes(3 * 1024 * 1024);
  const bytes = await tarOf([{ name: 'small.txt', body: 'small and whole\n' }, { name: 'model.bin', body: big }]);
  const row = await s.settleOutput(bytes);
  // The blob rots on disk: the same length, one byte of each file flipped near its end.
  const rotten = Buffer.from(bytes);
  rotten[bytes.indexOf('small and whole') + 3]! ^= 0xff;
  rotten[bytes.indexOf(big) + big.length - 10]! ^= 0xff;
  writeFileSync(createFsBlobStore(s.dir).pathOf(row.sha256), rotten);

  const small = await s.app.inject({ url: `/v1/artifacts/${row.id}/files/0`, headers: bearer(s.key) });
  assertError(t, small, 'internal', 500);
  t.match(small.json().error.message, /^The stored bytes of small.txt hash to [0-9a-f]{64}, not the [0-9a-f]{64} listed for it/, 'checked before anything went out: an error, not the bytes');

  await s.app.listen({ port: 0, host: '127.0.0.1' });
  const port = (s.app.server.address() as { port: number }).port;
  const res = await fetch(`http://127.0.0.1:${port}/v1/artifacts/${row.id}/files/1`, { headers: bearer(s.key) });
  t.equal(res.status, 200, 'the headers went out with the first bytes');
  t.equal(res.headers.get('content-length'), String(big.length));
  const got = await res.arrayBuffer().then(
    (b) => Buffer.from(b),
    (err: unknown) => (err instanceof Error ? err : new Error(String(err))),
  );
  t.ok(got instanceof Error, `the body is cut short before its end, so the download fails (${got instanceof Error ? got.message : `${got.length} bytes`})`);
});

t.test('behavior: an output that is no tar is listed as unreadable, with nothing to download', async (t) => {
  const s = await setup(t);
  const row = await s.settleOutput(randomBytes(2048));
  const list = await s.list(`/dashboard/api/jobs/${s.jobId}/output/files`);
  t.match(list, { state: 'unreadable', reason: /^not a tar the server can read/, files: [], fileCount: 0, tarSha256: row.sha256 });
  assertError(t, await s.app.inject({ url: `/v1/artifacts/${row.id}/files/0`, headers: bearer(s.key) }), 'not_found', 404);
});

t.test('error: no output yet, unknown and malformed indexes, other accounts, scopes, inputs, expired and re-written outputs', async (t) => {
  const s = await setup(t);
  const none = await s.app.inject({ url: `/dashboard/api/jobs/${s.jobId}/output/files`, headers: session(s.customer) });
  assertError(t, none, 'not_found', 404);
  t.equal(none.json().error.message, `The job ${s.jobId} has no stored output (yet).`);

  const row = await s.settleOutput(await tarOf([{ name: 'a.txt', body: 'a' }]));
  const missing = await s.app.inject({ url: `/dashboard/api/jobs/${s.jobId}/output/files/1`, headers: session(s.customer) });
  assertError(t, missing, 'not_found', 404);
  t.equal(missing.json().error.details[0].field, 'index');
  for (const bad of ['x', '01', '-1', '1e3', '9999999999']) {
    const res = await s.app.inject({ url: `/v1/artifacts/${row.id}/files/${bad}`, headers: bearer(s.key) });
    assertError(t, res, 'invalid_request', 400);
    t.equal(res.json().error.details[0].field, 'index', `${bad}: names index`);
  }
  assertError(t, await s.app.inject({ url: `/v1/artifacts/nope/files`, headers: bearer(s.key) }), 'invalid_request', 400);

  const other = await signIn(s.app, devWallet(2));
  assertError(t, await s.app.inject({ url: `/dashboard/api/jobs/${s.jobId}/output/files`, headers: session(other) }), 'not_found', 404);
  assertError(t, await s.app.inject({ url: `/dashboard/api/jobs/${s.jobId}/output/files/0`, headers: session(other) }), 'not_found', 404);
  const stranger = await createTestKey(s.db);
  assertError(t, await s.app.inject({ url: `/v1/artifacts/${row.id}/files`, headers: bearer(stranger.key) }), 'not_found', 404);
  assertError(t, await s.app.inject({ url: `/dashboard/api/jobs/${s.jobId}/output/files` }), 'missing_api_key', 401);
  const noRead = await createTestKey(s.db, { walletAddress: s.customer.address.toLowerCase(), scopes: ['jobs:read'] });
  assertError(t, await s.app.inject({ url: `/v1/artifacts/${row.id}/files/0`, headers: bearer(noRead.key) }), 'insufficient_scope', 403);

  const input = await s.app.inject({ method: 'POST', url: '/v1/artifacts', headers: { ...bearer(s.key), 'content-type': 'application/octet-stream' }, payload: await tarOf([{ name: 'in.txt', body: 'in' }]) });
  assertError(t, await s.app.inject({ url: `/v1/artifacts/${input.json().id}/files`, headers: bearer(s.key) }), 'not_found', 404);

  // Bytes the index was not made from are never listed or served from it.
  const other2 = await s.blobs.put(Readable.from([await tarOf([{ name: 'b.txt', body: 'b' }])]), { maxBytes: 1 << 20 });
  await s.db.query('UPDATE artifacts SET sha256 = $2 WHERE id = $1', [row.id, other2.sha256]);
  assertError(t, await s.app.inject({ url: `/v1/artifacts/${row.id}/files`, headers: bearer(s.key) }), 'not_found', 404);
  assertError(t, await s.app.inject({ url: `/v1/artifacts/${row.id}/files/0`, headers: bearer(s.key) }), 'not_found', 404);
  assertError(t, await s.app.inject({ url: `/dashboard/api/jobs/${s.jobId}/output/files`, headers: session(s.customer) }), 'not_found', 404);

  await s.db.query(`UPDATE artifacts SET sha256 = $2, expires_at = now() - interval '1 day' WHERE id = $1`, [row.id, row.sha256]);
  assertError(t, await s.app.inject({ url: `/dashboard/api/jobs/${s.jobId}/output/files`, headers: session(s.customer) }), 'gone', 410);
  assertError(t, await s.app.inject({ url: `/v1/artifacts/${row.id}/files/0`, headers: bearer(s.key) }), 'gone', 410);
});
