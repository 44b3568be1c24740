import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { createFsBlobStore } from '@gpufarm/control-plane/artifacts';
import { createTestKey } from '@gpufarm/control-plane/testing/app';
import { artifactSetup } from '@gpufarm/control-plane/testing/uploads';
import { createClient, type RequestEvent } from '../src/index.js';
import { pollPauses, WAIT_DEFAULTS } from '../src/wait.js';
import { failure, listening } from './helpers/control-plane.js';
import { frontOf } from './helpers/front.js';

const SPEC = { image: 'ghcr.io/acme/job:1', gpu: { count: 1 }, maxPricePerGpuHour: '2' };
const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

interface Teardown {
  teardown(fn: () => unknown): void;
}

async function setup(t: Teardown, options: { publicUrl?: string; onRequest?: (e: RequestEvent) => void } = {}) {
  const s = await listening((env) => artifactSetup(t, env), options.publicUrl);
  const gf = createClient({ baseUrl: s.baseUrl, apiKey: s.key, onRequest: options.onRequest });
  const out = mkdtempSync(join(tmpdir(), 'gf-sdk-download-'));
  t.teardown(() => rmSync(out, { recursive: true, force: true }));
  return { ...s, gf, out };
}

t.test('behavior: waitForJob answers the job once it is final', async (t) => {
  const { gf } = await setup(t);
  const { job } = await gf.jobs.create(SPEC);
  const polled: string[] = [];
  const waiting = gf.waitForJob(job.id, { initialIntervalMs: 50, onPoll: (j) => polled.push(j.status) });
  setTimeout(() => void gf.jobs.cancel(job.id), 150);
  const done = await waiting;
  t.equal(done.status, 'CANCELED');
  t.ok(polled.length >= 2, 'polled until the status was final');
  t.equal(polled.at(-1), 'CANCELED');
});

t.test('default: waitForJob pauses 2 s, then longer by half each poll up to 15 s, and waits at most 24 h', async (t) => {
  const first = pollPauses();
  t.same(Array.from({ length: 8 }, () => first.next().value), [2_000, 3_000, 4_500, 6_750, 10_125, 15_000, 15_000, 15_000], 'the pauses of the spec');
  t.equal(WAIT_DEFAULTS.timeoutMs, 24 * 3_600_000, 'gives up waiting after 24 hours');

  // With no options, the polls of a real job are that far apart (at least: a loaded machine only adds).
  const { gf } = await setup(t);
  const { job } = await gf.jobs.create(SPEC);
  const polledAt: number[] = [];
  const waiting = gf.waitForJob(job.id, {
    onPoll: () => {
      polledAt.push(Date.now());
      if (polledAt.length === 3) void gf.jobs.cancel(job.id);
    },
  });
  t.equal((await waiting).status, 'CANCELED');
  const gaps = polledAt.slice(1).map((at, i) => at - polledAt[i]!);
  t.ok(gaps[0]! >= 1_990, `2 s before the second poll (${gaps[0]} ms)`);
  t.ok(gaps[1]! >= 2_990, `3 s before the third (${gaps[1]} ms)`);
});

t.test('behavior: waitForJob polls through a passing outage and stops at a non-retryable error', async (t) => {
  const { gf, baseUrl, key } = await setup(t);
  const { job } = await gf.jobs.create(SPEC);
  await gf.jobs.cancel(job.id);
  const front = await frontOf(t, baseUrl, [503, 503, 503, 'forward']);
  const through = createClient({ baseUrl: front.baseUrl, apiKey: key, retries: 0 });
  t.equal((await through.waitForJob(job.id, { initialIntervalMs: 20 })).status, 'CANCELED');
  t.equal(front.seen.length, 4, 'three failed polls, then the answer');
  const notFound = await failure(through.waitForJob(`job_${'a'.repeat(26)}`, { initialIntervalMs: 20 }));
  t.equal(notFound.code, 'not_found');
  t.equal(front.seen.length, 5, 'not_found ends the wait at once');
});

t.test('error: timeout when the job is not final in time; the job keeps its status', async (t) => {
  const { gf } = await setup(t);
  const { job } = await gf.jobs.create(SPEC);
  const started = Date.now();
  const error = await failure(gf.waitForJob(job.id, { timeoutMs: 400, initialIntervalMs: 100 }));
  t.equal(error.code, 'timeout');
  t.match(error.message, 'keeps running');
  t.ok(Date.now() - started >= 400 && Date.now() - started < 2_000, 'gave up at the deadline');
  t.equal((await gf.jobs.get(job.id)).status, 'CREATED');
});

t.test('behavior: an AbortSignal stops waitForJob with its reason', async (t) => {
  const { gf } = await setup(t);
  const { job } = await gf.jobs.create(SPEC);
  const controller = new AbortController();
  const reason = new Error('stopped by the caller');
  setTimeout(() => controller.abort(reason), 150);
  const started = Date.now();
  await t.rejects(gf.waitForJob(job.id, { signal: controller.signal, initialIntervalMs: 2_000 }), reason);
  t.ok(Date.now() - started < 1_000, 'stopped mid-pause, not at its end');
  await t.rejects(gf.waitForJob(job.id, { signal: AbortSignal.abort(reason) }), reason, 'an aborted signal stops before polling');
});

t.test('default: downloadArtifact follows the 302, verifies the hash and writes the file', async (t) => {
  const { gf, out } = await setup(t);
  const bytes = Buffer.from('bytes to verify '.repeat(4096));
  const uploaded = await gf.artifacts.upload(bytes);
  const dest = join(out, 'result.bin');
  const result = await gf.downloadArtifact(uploaded.id, dest, { expectedSha256: sha256(bytes) });
  t.same(result, { path: dest, sha256: sha256(bytes), sizeBytes: bytes.length });
  t.equal(sha256(readFileSync(dest)), sha256(bytes));
  t.same(readdirSync(out), ['result.bin'], 'no temporary file left');
});

t.test('error: integrity_error for stored bytes changed on disk, and no file at the destination', async (t) => {
  const { gf, out, dir } = await setup(t);
  const bytes = Buffer.from('the recorded bytes '.repeat(1000));
  const uploaded = await gf.artifacts.upload(bytes);
  const stored = createFsBlobStore(dir).pathOf(uploaded.sha256);
  const changed = Buffer.from(bytes);
  changed[10] = changed[10]! ^ 0xff;
  writeFileSync(stored, changed);
  const dest = join(out, 'result.bin');
  const error = await failure(gf.downloadArtifact(uploaded.id, dest));
  t.equal(error.code, 'integrity_error');
  t.ok(error.details.some((d) => d.message.includes(sha256(changed))), 'details give the hash that arrived');
  t.notOk(existsSync(dest), 'nothing at the destination');
  t.same(readdirSync(out), [], 'no temporary file left');

  writeFileSync(stored, bytes);
  const mismatch = await failure(gf.downloadArtifact(uploaded.id, dest, { expectedSha256: '0'.repeat(64) }));
  t.equal(mismatch.code, 'integrity_error', 'a caller-given recorded hash is checked too');
  t.ok(mismatch.details.some((d) => d.field === 'expectedSha256'));
  t.notOk(existsSync(dest));
});

t.test('error: not_found for another account’s artifact', async (t) => {
  const s = await setup(t);
  const uploaded = await s.gf.artifacts.upload(Buffer.from('mine'));
  const other = await createTestKey(s.db);
  const error = await failure(createClient({ baseUrl: s.baseUrl, apiKey: other.key }).downloadArtifact(uploaded.id, join(s.out, 'x')));
  t.equal(error.code, 'not_found');
  t.same(readdirSync(s.out), []);
});

t.test('behavior: a download that breaks off asks for a new URL and goes on with Range from the bytes it has', async (t) => {
  // A real HTTP server in front of the control plane's signed URLs: it cuts the first file answer after 64 KiB.
  let upstream = '';
  let cuts = 1;
  const fileRequests: Array<string | undefined> = [];
  const front = createServer((req, res) => {
    if (req.url!.startsWith('/files/')) fileRequests.push(req.headers.range);
    const cut = req.url!.startsWith('/files/') && cuts-- > 0;
    const out = httpRequest(`${upstream}${req.url}`, { method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode!, answer.headers);
      let sent = 0;
      answer.on('data', (chunk: Buffer) => {
        if (cut && sent >= 64 * 1024) {
          answer.destroy();
          res.destroy();
          return;
        }
        sent += chunk.length;
        res.write(chunk);
      });
      answer.on('end', () => res.end());
    });
    req.pipe(out);
  });
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    front.closeAllConnections();
    front.close();
  });
  const events: RequestEvent[] = [];
  const s = await setup(t, { publicUrl: `http://127.0.0.1:${(front.address() as { port: number }).port}`, onRequest: (e) => events.push(e) });
  upstream = s.baseUrl;
  const bytes = randomBytes(600 * 1024);
  const uploaded = await s.gf.artifacts.upload(bytes);
  const dest = join(s.out, 'big.bin');
  const result = await s.gf.downloadArtifact(uploaded.id, dest);
  t.equal(result.sha256, sha256(bytes));
  t.equal(sha256(readFileSync(dest)), sha256(bytes), 'the file on disk is whole');
  t.equal(fileRequests.length, 2, 'one break, one resume');
  t.equal(fileRequests[0], undefined);
  t.match(fileRequests[1], /^bytes=[1-9][0-9]*-$/, 'the resume asked for the rest only');
  t.equal(events.filter((e) => e.url.includes(`/v1/artifacts/${uploaded.id}`)).length, 2, 'a new signed URL for the resume');
  t.same(events.filter((e) => e.url.includes('/files/')).map((e) => e.status), [200, 206]);
  t.same(readdirSync(s.out), ['big.bin']);
});

t.test('behavior: downloadArtifact reports progress as bytes arrive, ending at the recorded size', async (t) => {
  const { gf, out } = await setup(t);
  const bytes = randomBytes(1024 * 1024);
  const uploaded = await gf.artifacts.upload(bytes);
  const seen: [number, number][] = [];
  await gf.downloadArtifact(uploaded.id, join(out, 'big.bin'), { onProgress: (received, total) => seen.push([received, total]) });
  t.ok(seen.length > 1, 'more than one report for a 1 MiB download');
  t.ok(seen.every(([, total]) => total === bytes.length), 'the total is the recorded size');
  t.ok(seen.every(([received], i) => i === 0 || received > seen[i - 1]![0]), 'received only grows');
  t.same(seen.at(-1), [bytes.length, bytes.length], 'the last report is the whole file');
});
