import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import t, { type Test } from 'tap';
import { BlobTooLargeError, type BlobStore } from '../src/artifacts/blob-store.js';
import { FRESH_BLOB_GRACE_MS, sweepExpiredArtifacts } from '../src/artifacts/expiry.js';
import { createFsBlobStore } from '../src/artifacts/fs-blob-store.js';
import { checkJobInputs, JobInputUnavailableError, resolveJobInputs } from '../src/artifacts/inputs.js';
import { newArtifactId } from '../src/artifacts/metadata.js';
import { parseRange } from '../src/artifacts/range.js';
import { createS3BlobStore, createS3Client, S3_BLOB_PREFIX, S3_TMP_PREFIX } from '../src/artifacts/s3-blob-store.js';
import { insertArtifact, type NewArtifact } from '../src/artifacts/store.js';
import type { Database } from '../src/db/database.js';
import { createTestKey } from './helpers/app.js';
import { BACKENDS, createPostgresTestDatabase } from './helpers/database.js';
import { startS3rver } from './helpers/s3rver.js';

const sha256 = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'gf-blobs-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Every stored blob file under `dir` (not the temp folder). */
function blobFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).filter((d) => d !== 'tmp').flatMap((d) => readdirSync(join(dir, d)));
}

/** A stream of `chunks` chunks of 64 KiB random bytes, and their hash. */
function randomChunks(chunks: number): { stream: Readable; bytes: Buffer } {
  const parts = Array.from({ length: chunks }, () => randomBytes(64 * 1024));
  return { stream: Readable.from(parts), bytes: Buffer.concat(parts) };
}

interface StoreUnderTest {
  blobs: BlobStore;
  /** The hashes stored (each once). */
  stored(): Promise<string[]>;
  /** What is left of uploads in progress (temp files or objects). */
  leftovers(): Promise<string[]>;
}

const STORES: [string, (t: Test) => Promise<StoreUnderTest>][] = [
  [
    'fs',
    async (t) => {
      const dir = tempDir(t);
      const tmpFiles = () => (existsSync(join(dir, 'tmp')) ? readdirSync(join(dir, 'tmp')) : []);
      return { blobs: createFsBlobStore(dir), stored: async () => blobFiles(dir), leftovers: async () => tmpFiles() };
    },
  ],
  [
    's3',
    async (t) => {
      const server = await startS3rver(t);
      const client = createS3Client(server.config);
      t.teardown(() => client.destroy());
      const keys = async (prefix: string) => {
        const listed = await client.send(new ListObjectsV2Command({ Bucket: server.bucket, Prefix: prefix }));
        return (listed.Contents ?? []).map((o) => o.Key!.slice(prefix.length));
      };
      return { blobs: createS3BlobStore(client, server.bucket), stored: () => keys(S3_BLOB_PREFIX), leftovers: () => keys(S3_TMP_PREFIX) };
    },
  ],
];

for (const [store, open] of STORES) {
  t.test(`${store} blob store: stored bytes hash as an independent hash says, in one part or several`, async (t) => {
    const { blobs, stored: storedHashes, leftovers } = await open(t);
    for (const chunks of [20, 100]) {
      const { stream, bytes } = randomChunks(chunks);
      const stored = await blobs.put(stream, { maxBytes: bytes.length });
      t.equal(stored.sha256, sha256(bytes));
      t.equal(stored.sizeBytes, bytes.length);
      t.ok((await storedHashes()).includes(stored.sha256), 'stored under its hash');
      t.equal(sha256(Buffer.from(await new Response(Readable.toWeb(blobs.open(stored.sha256)) as ReadableStream).arrayBuffer())), stored.sha256, 'read back whole');
      t.equal((await blobs.stat(stored.sha256))?.sizeBytes, bytes.length);
    }
    t.same(await leftovers(), [], 'nothing left of the uploads');
  });

  t.test(`${store} blob store: equal bytes are stored once`, async (t) => {
    const { blobs, stored } = await open(t);
    const a = await blobs.put(Readable.from([Buffer.from('same bytes')]), { maxBytes: 100 });
    const b = await blobs.put(Readable.from([Buffer.from('same '), Buffer.from('bytes')]), { maxBytes: 100 });
    await blobs.put(Readable.from([Buffer.from('other bytes')]), { maxBytes: 100 });
    t.equal(a.sha256, b.sha256);
    t.same((await stored()).sort(), [a.sha256, sha256('other bytes')].sort());
  });

  t.test(`${store}: error: past maxBytes the put throws BlobTooLargeError and keeps nothing`, async (t) => {
    const { blobs, stored, leftovers } = await open(t);
    await t.rejects(blobs.put(randomChunks(4).stream, { maxBytes: 3 * 64 * 1024 + 1 }), BlobTooLargeError);
    // Past two 5 MiB parts: a multipart upload had begun.
    await t.rejects(blobs.put(randomChunks(200).stream, { maxBytes: 11 * 1024 * 1024 }), BlobTooLargeError);
    t.same(await stored(), []);
    t.same(await leftovers(), [], 'the temp file or object is deleted');
    const exact = randomChunks(2);
    t.equal((await blobs.put(exact.stream, { maxBytes: 2 * 64 * 1024 })).sizeBytes, 2 * 64 * 1024, 'exactly maxBytes is allowed');
  });

  t.test(`${store}: error: a source that fails midway keeps nothing`, async (t) => {
    const { blobs, stored, leftovers } = await open(t);
    const source = new PassThrough();
    // Broken off once the store reads it, as a client that goes away mid-upload.
    source.once('resume', () => setImmediate(() => source.destroy(new Error('the client went away'))));
    source.write(randomBytes(64 * 1024));
    const putting = blobs.put(source, { maxBytes: 1 << 30 });
    await t.rejects(putting, /the client went away/);
    t.same(await stored(), []);
    t.same(await leftovers(), []);
  });

  t.test(`${store} blob store: byte ranges, stat and delete`, async (t) => {
    const { blobs } = await open(t);
    const before = Date.now();
    const { sha256: id } = await blobs.put(Readable.from([Buffer.from('0123456789')]), { maxBytes: 100 });
    t.equal(await text(blobs.open(id, { start: 2, end: 5 })), '2345', 'inclusive range');
    t.equal(await text(blobs.open(id, { start: 9, end: 9 })), '9');
    const found = await blobs.stat(id);
    t.equal(found?.sizeBytes, 10);
    // S3 keeps LastModified in whole seconds.
    t.ok(found?.modifiedAt && found.modifiedAt.getTime() >= Math.floor(before / 1000) * 1000 - 1000, 'modifiedAt is the write');
    await blobs.delete(id);
    t.equal(await blobs.stat(id), null);
    await blobs.delete(id);
    t.pass('deleting an absent blob is fine');
    t.throws(() => blobs.open('../../etc/passwd'), 'only sha256 names are opened');
    await t.rejects(text(blobs.open(id)), 'opening absent bytes fails the stream');
  });
}

t.test('args: Range headers', async (t) => {
  const cases: [string | undefined, number, ReturnType<typeof parseRange>][] = [
    [undefined, 10, { kind: 'full' }],
    ['bytes=0-3', 10, { kind: 'partial', start: 0, end: 3 }],
    ['bytes=5-', 10, { kind: 'partial', start: 5, end: 9 }],
    ['bytes=-3', 10, { kind: 'partial', start: 7, end: 9 }],
    ['bytes=-30', 10, { kind: 'partial', start: 0, end: 9 }],
    ['bytes=8-100', 10, { kind: 'partial', start: 8, end: 9 }],
    ['bytes=10-', 10, { kind: 'unsatisfiable' }],
    ['bytes=10-20', 10, { kind: 'unsatisfiable' }],
    ['bytes=-0', 10, { kind: 'unsatisfiable' }],
    ['bytes=0-0', 0, { kind: 'unsatisfiable' }],
    ['bytes=5-2', 10, { kind: 'full' }],
    ['bytes=0-1,4-5', 10, { kind: 'full' }],
    ['items=0-1', 10, { kind: 'full' }],
    ['bytes=-', 10, { kind: 'full' }],
  ];
  for (const [header, size, expected] of cases) t.same(parseRange(header, size), expected, `${header} of ${size}`);
});

async function artifactRow(db: Database, fields: Partial<NewArtifact> & { accountId: string; sha256: string }) {
  return insertArtifact(db, { id: newArtifactId(), jobId: null, assignmentId: null, kind: 'input', name: null, filename: 'input.bin', sizeBytes: 1, declaredSha256: null, ttlDays: 30, ...fields });
}

const hoursFromNow = (h: number) => new Date(Date.now() + h * 3600_000);

// The store's SQL runs on both backends; the rest of the sweep's paths on PostgreSQL only (PGlite starts slowly).
for (const [backend, createDatabase] of BACKENDS) {
  t.test(`${backend}: behavior: the expiry sweep deletes bytes only when no unexpired artifact shares them`, async (t) => {
    const { db } = await createDatabase(t);
    const dir = tempDir(t);
    const blobs = createFsBlobStore(dir);
    const alice = await createTestKey(db);
    const bob = await createTestKey(db);
    const shared = await blobs.put(Readable.from([Buffer.from('shared bytes')]), { maxBytes: 100 });
    const alone = await blobs.put(Readable.from([Buffer.from('alone bytes')]), { maxBytes: 100 });
    const expiredShared = await artifactRow(db, { accountId: alice.accountId, sha256: shared.sha256 });
    const liveShared = await artifactRow(db, { accountId: bob.accountId, sha256: shared.sha256 });
    await artifactRow(db, { accountId: alice.accountId, sha256: alone.sha256 });
    // Rows expiring in an hour; the sweep runs "in two hours", when the blobs are past the fresh grace.
    await db.query('UPDATE artifacts SET expires_at = $1', [hoursFromNow(1)]);
    await db.query('UPDATE artifacts SET expires_at = $1 WHERE id = $2', [hoursFromNow(24), liveShared.id]);
    const old = new Date(Date.now() - 2 * FRESH_BLOB_GRACE_MS);
    for (const s of [shared.sha256, alone.sha256]) utimesSync(blobs.pathOf(s), old, old);
    const later = () => hoursFromNow(2);

    t.same(await sweepExpiredArtifacts({ db, blobs, now: later }), { deleted: 1, sparedFresh: 0 });
    t.equal(await blobs.stat(alone.sha256), null, 'the unshared expired blob is gone');
    t.not(await blobs.stat(shared.sha256), null, "bob's live artifact keeps the shared bytes");
    const [row] = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM artifacts');
    t.equal(row!.n, 3, 'rows stay (a download answers gone)');

    await db.query('UPDATE artifacts SET expires_at = $1 WHERE id = $2', [hoursFromNow(1), liveShared.id]);
    t.same(await sweepExpiredArtifacts({ db, blobs, now: later }), { deleted: 1, sparedFresh: 0 });
    t.equal(await blobs.stat(shared.sha256), null, 'once every use expired, the bytes go');
    t.same(await sweepExpiredArtifacts({ db, blobs, now: later }), { deleted: 0, sparedFresh: 0 }, 'a second sweep finds nothing to do');
    t.ok(expiredShared.id);
  });

  if (backend === 'postgres') t.test(`${backend}: behavior: the sweep spares freshly written bytes (an upload of equal bytes may be writing its row)`, async (t) => {
    const { db } = await createDatabase(t);
    const blobs = createFsBlobStore(tempDir(t));
    const alice = await createTestKey(db);
    const stored = await blobs.put(Readable.from([Buffer.from('fresh')]), { maxBytes: 100 });
    await artifactRow(db, { accountId: alice.accountId, sha256: stored.sha256 });
    await db.query("UPDATE artifacts SET expires_at = now() - interval '1 day'");
    t.same(await sweepExpiredArtifacts({ db, blobs }), { deleted: 0, sparedFresh: 1 });
    t.not(await blobs.stat(stored.sha256), null);
  });

  if (backend === 'postgres') t.test(`${backend}: behavior: the sweep pages through many expired hashes`, async (t) => {
    const { db } = await createDatabase(t);
    const dir = tempDir(t);
    const blobs = createFsBlobStore(dir);
    const alice = await createTestKey(db);
    const old = new Date(Date.now() - 2 * FRESH_BLOB_GRACE_MS);
    for (let i = 0; i < 7; i++) {
      const stored = await blobs.put(Readable.from([Buffer.from(`blob ${i}`)]), { maxBytes: 100 });
      utimesSync(blobs.pathOf(stored.sha256), old, old);
      await artifactRow(db, { accountId: alice.accountId, sha256: stored.sha256 });
    }
    await db.query("UPDATE artifacts SET expires_at = now() - interval '1 day'");
    t.same(await sweepExpiredArtifacts({ db, blobs }, { batch: 3 }), { deleted: 7, sparedFresh: 0 });
    t.same(blobFiles(dir), []);
  });

  t.test(`${backend}: job inputs: checked against the account and expiry, resolved to signed URLs`, async (t) => {
    const { db } = await createDatabase(t);
    const alice = await createTestKey(db);
    const bob = await createTestKey(db);
    const mine = await artifactRow(db, { accountId: alice.accountId, sha256: sha256('mine'), sizeBytes: 4 });
    const expired = await artifactRow(db, { accountId: alice.accountId, sha256: sha256('old') });
    await db.query("UPDATE artifacts SET expires_at = now() - interval '1 second' WHERE id = $1", [expired.id]);
    const bobs = await artifactRow(db, { accountId: bob.accountId, sha256: sha256('bob') });

    t.same(await checkJobInputs(db, alice.accountId, [{ artifactId: mine.id, mountName: 'data' }]), []);
    const details = await checkJobInputs(db, alice.accountId, [
      { artifactId: mine.id, mountName: 'a' },
      { artifactId: bobs.id, mountName: 'b' },
      { artifactId: expired.id, mountName: 'c' },
      { artifactId: 'art_unknown', mountName: 'd' },
    ]);
    t.same(details.map((d) => d.field), ['inputs[1].artifactId', 'inputs[2].artifactId', 'inputs[3].artifactId']);
    t.match(details[0]!.message, /no artifact .* on this account/);
    t.match(details[1]!.message, /expired/);

    const urlFor = (mountName: string) => `http://cp.test/agent/v1/assignments/asg_1/inputs/${mountName}`;
    const [resolved] = await resolveJobInputs(db, urlFor, alice.accountId, [{ artifactId: mine.id, mountName: 'data' }]);
    t.equal(resolved!.mountName, 'data');
    t.equal(resolved!.sha256, sha256('mine'));
    t.equal(resolved!.sizeBytes, 4);
    t.equal(resolved!.url, 'http://cp.test/agent/v1/assignments/asg_1/inputs/data', 'the route the agent asks for a signed URL when it downloads');
    await t.rejects(resolveJobInputs(db, urlFor, alice.accountId, [{ artifactId: bobs.id, mountName: 'b' }]), JobInputUnavailableError);
    await t.rejects(resolveJobInputs(db, urlFor, alice.accountId, [{ artifactId: expired.id, mountName: 'c' }]), new JobInputUnavailableError(expired.id, 'expired'));
  });
}

t.test('s3: behavior: the expiry sweep reads LastModified as the write time: fresh bytes spared, old ones deleted', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const { blobs, stored } = await STORES.find(([name]) => name === 's3')![1](t);
  const alice = await createTestKey(db);
  const kept = await blobs.put(Readable.from([Buffer.from('expired bytes in the bucket')]), { maxBytes: 100 });
  await artifactRow(db, { accountId: alice.accountId, sha256: kept.sha256 });
  await db.query("UPDATE artifacts SET expires_at = now() - interval '1 second'");
  t.same(await sweepExpiredArtifacts({ db, blobs }), { deleted: 0, sparedFresh: 1 }, 'just written: spared');
  t.same(await stored(), [kept.sha256]);
  const later = () => new Date(Date.now() + 2 * FRESH_BLOB_GRACE_MS);
  t.same(await sweepExpiredArtifacts({ db, blobs, now: later }), { deleted: 1, sparedFresh: 0 }, 'past the grace: deleted');
  t.same(await stored(), []);
});
