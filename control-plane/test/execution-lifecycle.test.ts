import { createHash, generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import t, { type Test } from 'tap';
import { jobSchema } from '@gpufarm/shared';
import { argvSha256, canaryResult, signRecord, type ExecutionRecord } from '@gpufarm/shared/node';
import { createFsBlobStore } from '../src/artifacts/fs-blob-store.js';
import type { Database } from '../src/db/database.js';
import { openPostgres } from '../src/db/postgres.js';
import type { ExecutionDeps } from '../src/execution/deps.js';
import { assignmentAccepted, assignmentLost, assignmentRejected, assignmentStatus } from '../src/execution/lifecycle.js';
import { MAX_ATTEMPTS } from '../src/execution/failures.js';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { newId } from '../src/ids.js';
import { statusMessage } from './helpers/agent-client.js';
import { bearer, buildTestApp, createTestKey } from './helpers/app.js';
import { createPostgresTestDatabase } from './helpers/database.js';
import { tarOf } from './helpers/uploads.js';

/**
 * The execution lifecycle on a real PostgreSQL database: agent reports in, job states, log lines,
 * GPUs, verification levels and cost out. The matcher's part (an offered assignment holding a
 * GPU) is written directly, as the matcher writes it.
 */

const CANARY_DIGEST = `sha256:${'c'.repeat(64)}`;
const BUSYBOX_DIGEST = `sha256:${'b'.repeat(64)}`;
const PRICE = 400_000;

async function setup(t: Test, options: { image?: string; command?: string[]; maxRuntimeSeconds?: number; deterministic?: boolean; db?: Database } = {}) {
  const test = await buildTestApp(t, { env: { GF_CANARY_IMAGE: `127.0.0.1:5000/gpufarm/canary@${CANARY_DIGEST}` }, ...(options.db ? { db: options.db } : {}) });
  const { db, app, config } = test;
  const dir = mkdtempSync(join(tmpdir(), 'gf-exec-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const blobs = createFsBlobStore(dir);
  const keys = generateKeyPairSync('ed25519');
  const farm = await createFarm(db);
  await db.query('UPDATE farms SET payout_address = $2 WHERE id = $1', [farm.id, `0x${'a'.repeat(40)}`]);
  const machine = await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: PRICE });
  await db.query('UPDATE machines SET public_key_pem = $2, token_hash = $3 WHERE id = $1', [machine.id, keys.publicKey.export({ type: 'spki', format: 'pem' }).toString(), newId('tok')]);
  await test.offerIndex.refresh();
  const key = await createTestKey(db);
  const image = options.image ?? `127.0.0.1:5000/gpufarm/busybox@${BUSYBOX_DIGEST}`;
  const command = options.command ?? ['sh', '-c', 'echo hi > /output/a.txt'];
  const res = await app.inject({
    method: 'POST',
    url: '/v1/jobs',
    headers: bearer(key.key),
    payload: { image, command, gpu: { count: 1 }, maxRuntimeSeconds: options.maxRuntimeSeconds ?? 600, workloadType: 'batch', ...(options.deterministic === undefined ? {} : { deterministic: options.deterministic }) },
  });
  if (res.statusCode !== 201) t.fail(res.body);
  const jobId = (res.json() as { job: { id: string } }).job.id;
  // The server's clock (when it received a report): set by `serverAt` where a test needs the
  // window it measures to be longer than the test takes; the wall clock otherwise.
  let serverClock: Date | null = null;
  const serverAt = (iso: string) => {
    serverClock = new Date(iso);
  };
  const deps: ExecutionDeps = { db, escrow: null, config: config.execution, blobs, now: () => serverClock ?? new Date() };

  /** Puts the job on the machine as the matcher does: QUEUED -> MATCHING, an offered assignment holding GPU 0. */
  const offer = async () => {
    const assignmentId = newId('asg');
    const [{ attempt }] = (await db.query<{ attempt: number }>('SELECT count(*)::int + 1 AS attempt FROM assignments WHERE job_id = $1', [jobId])) as [{ attempt: number }];
    await db.query(
      `INSERT INTO assignments (id, job_id, machine_id, attempt, gpu_indices, class_id, gpu_model, price_per_gpu_hour_micro_usd, spec)
       VALUES ($1, $2, $3, $6, '{0}', 'rtx-4090-24gb', 'NVIDIA GeForce RTX 4090', $4, $5::jsonb)`,
      [assignmentId, jobId, machine.id, PRICE, JSON.stringify({ image, imageDigest: null, command }), attempt],
    );
    await db.query(`UPDATE machine_gpus SET busy = true, assignment_id = $2 WHERE machine_id = $1`, [machine.id, assignmentId]);
    await db.query(`UPDATE jobs SET status = 'MATCHING', assignment_id = $2, attempts = $3 WHERE id = $1`, [jobId, assignmentId, attempt]);
    return assignmentId;
  };
  const status = statusMessage;
  /** Stores an upload as the upload route does (server hash of the bytes, the declared one beside it). */
  const upload = async (assignmentId: string, name: string, bytes: Buffer, declared = createHash('sha256').update(bytes).digest('hex')) => {
    const put = await blobs.put(Readable.from([bytes]), { maxBytes: 1 << 30 });
    const [account] = await db.query<{ account_id: string }>('SELECT account_id FROM jobs WHERE id = $1', [jobId]);
    await db.query(
      `INSERT INTO artifacts (id, account_id, job_id, assignment_id, kind, name, filename, size_bytes, sha256, declared_sha256, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, now() + interval '30 days')`,
      [newId('art'), account!.account_id, jobId, assignmentId, name === 'log' ? 'log' : 'output', name, `${jobId}-${name}`, put.sizeBytes, put.sha256, declared],
    );
    return { sha256: declared, sizeBytes: bytes.length, serverSha256: put.sha256 };
  };
  const job = async () => jobSchema.parse((await app.inject({ method: 'GET', url: `/v1/jobs/${jobId}`, headers: bearer(key.key) })).json());
  const lines = async () => (await db.query<{ line: string }>(`SELECT line FROM log_lines WHERE job_id = $1 AND stream = 'system' ORDER BY id`, [jobId])).map((r) => r.line);
  const freeGpus = async () => (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM machine_gpus WHERE machine_id = $1 AND NOT busy AND assignment_id IS NULL', [machine.id]))[0]!.n;
  const sign = (record: ExecutionRecord) => signRecord(record, keys.privateKey);
  return { ...test, deps, jobId, machine, image, command, offer, status, upload, job, lines, freeGpus, sign, key, serverAt };
}

// The machine's clock: 90 s of run.
const STARTED = '2026-11-22T10:00:00.000Z';
const FINISHED = '2026-11-22T10:01:30.000Z'; // 90 s
// The server's clock, 7 s behind the machine's: it received the start and the end 95 s apart (network delays included).
const RECEIVED_START = '2026-11-22T09:59:53.000Z';
const RECEIVED_END = '2026-11-22T10:01:28.000Z';

t.test('a run: accepted, started, exited, finished with a signed record on a pinned digest -> COMPLETED, EXECUTION_VERIFIED, priced', async (t) => {
  const s = await setup(t);
  const id = await s.offer();
  await assignmentAccepted(s.deps, s.machine.id, id);
  await assignmentStatus(s.deps, s.machine.id, s.status(id, 'pulling'));
  s.serverAt(RECEIVED_START);
  await assignmentStatus(s.deps, s.machine.id, s.status(id, 'running', { imageDigest: BUSYBOX_DIGEST, startedAt: STARTED }));
  t.equal((await s.job()).status, 'RUNNING');
  const exit = { imageDigest: BUSYBOX_DIGEST, startedAt: STARTED, finishedAt: FINISHED, exitCode: 0, oomKilled: false, timedOut: false };
  s.serverAt(RECEIVED_END);
  await assignmentStatus(s.deps, s.machine.id, s.status(id, 'exited', exit));
  s.serverAt('2026-11-22T10:05:00.000Z'); // uploads take a while: the end is the first report of it
  await assignmentStatus(s.deps, s.machine.id, s.status(id, 'exited', exit)); // repeated after a restart
  await assignmentStatus(s.deps, s.machine.id, s.status(id, 'uploading', exit));
  await assignmentStatus(s.deps, s.machine.id, s.status(id, 'uploading', exit));
  const output = await s.upload(id, 'output-0', await tarOf({ 'a.txt': 'hi\n' }));
  const log = await s.upload(id, 'log', Buffer.from('{"seq":0}\n'));
  const record = s.sign({
    version: 1,
    assignmentId: id,
    jobId: s.jobId,
    imageDigest: BUSYBOX_DIGEST,
    argvSha256: argvSha256(s.command),
    startedAt: STARTED,
    finishedAt: FINISHED,
    exitCode: 0,
    oomKilled: false,
    timedOut: false,
    outputs: [{ path: '/output', sha256: output.sha256, sizeBytes: output.sizeBytes }],
    log: { sha256: log.sha256, sizeBytes: log.sizeBytes },
  });
  await assignmentStatus(s.deps, s.machine.id, s.status(id, 'finished', { ...exit, outputs: [{ path: '/output', name: 'output-0', sha256: output.sha256, sizeBytes: output.sizeBytes }], log, record }));
  const job = await s.job();
  t.equal(job.status, 'COMPLETED');
  t.equal(job.verificationLevel, 'EXECUTION_VERIFIED');
  t.same(job.result, { hostHash: output.sha256, serverHash: output.serverSha256, hashesMatch: true, outputArtifactId: job.result!.outputArtifactId, logArtifactId: job.result!.logArtifactId });
  t.ok(job.result!.outputArtifactId && job.result!.logArtifactId);
  // 90 s (the machine's figure, shorter than the 95 s the server saw) at $0.40/GPU-hour: ceil(90 * 400000 / 3600) = 10000, fee 10% = 1000.
  t.same(job.cost, { billableGpuSeconds: 90, computeMicroUsd: 10_000, feeMicroUsd: 1_000, totalMicroUsd: 11_000, finalPayment: job.cost!.finalPayment });
  t.same(job.assignment, { gpu: { model: 'NVIDIA GeForce RTX 4090', modelClass: 'rtx-4090-24gb', count: 1 }, farm: job.assignment!.farm, region: 'us-east', pricePerGpuHourMicroUsd: PRICE, startedAt: RECEIVED_START, finishedAt: RECEIVED_END, exitCode: 0 }, 'the customer sees the server\'s times');
  const [kept] = await s.db.query<{ reported_started_at: Date; reported_finished_at: Date }>('SELECT reported_started_at, reported_finished_at FROM assignments WHERE id = $1', [id]);
  t.same([kept?.reported_started_at.toISOString(), kept?.reported_finished_at.toISOString()], [STARTED, FINISHED], 'the machine\'s own times are kept beside them');
  t.same(job.artifacts.map((a) => a.kind).sort(), ['log', 'output']);
  t.equal(await s.freeGpus(), 1, 'the GPU is free again');
  const said = await s.lines();
  t.equal(said.filter((l) => l === 'uploading outputs and logs').length, 1, 'one uploading line despite the repeat');
  t.notOk(said.some((l) => /^(pulling|started|exited)/.test(l)), 'the machine says those in its own notes: no service duplicate');
  t.ok(said.some((l) => l.startsWith('verified: EXECUTION_VERIFIED')));
  t.ok(said.some((l) => l.startsWith('completed: 90 billable GPU-seconds') && l.endsWith('runtime 90 s: the shorter of 95 s from the start to the end as the service received them and 90 s as the machine reports them')), said.join('\n'));
  // A second finished report (the agent restarted after sending it) changes nothing.
  await assignmentStatus(s.deps, s.machine.id, s.status(id, 'finished', { ...exit, outputs: [], record }));
  t.equal((await s.job()).verificationLevel, 'EXECUTION_VERIFIED');
});

t.test('a signature by another key, or an unpinned image, stays HOST_REPORTED', async (t) => {
  const s = await setup(t, { image: '127.0.0.1:5000/gpufarm/busybox:latest' });
  const id = await s.offer();
  const exit = { imageDigest: BUSYBOX_DIGEST, startedAt: STARTED, finishedAt: FINISHED, exitCode: 3, oomKilled: false, timedOut: false };
  await assignmentStatus(s.deps, s.machine.id, s.status(id, 'running', exit));
  const output = await s.upload(id, 'output-0', await tarOf({ 'a.txt': 'x' }));
  await assignmentStatus(s.deps, s.machine.id, s.status(id, 'finished', { ...exit, outputs: [{ path: '/output', name: 'output-0', sha256: output.sha256, sizeBytes: output.sizeBytes }] }));
  const job = await s.job();
  t.equal(job.status, 'COMPLETED', 'a non-zero exit still completes; exitCode tells');
  t.equal(job.assignment?.exitCode, 3);
  t.equal(job.verificationLevel, 'HOST_REPORTED');
  t.equal(job.result?.hashesMatch, true);
});

t.test('the canary: the server recomputes sha256^n(jobId) -> RESULT_VERIFIED; a wrong result is HOST_REPORTED', async (t) => {
  for (const right of [true, false]) {
    const s = await setup(t, { image: `127.0.0.1:5000/gpufarm/canary@${CANARY_DIGEST}`, command: ['sha256-chain', '1000'], deterministic: true });
    const id = await s.offer();
    const exit = { imageDigest: CANARY_DIGEST, startedAt: STARTED, finishedAt: FINISHED, exitCode: 0, oomKilled: false, timedOut: false };
    await assignmentStatus(s.deps, s.machine.id, s.status(id, 'running', exit));
    const text = right ? canaryResult(s.jobId, 1000) : canaryResult(s.jobId, 999);
    const output = await s.upload(id, 'output-0', await tarOf({ 'result.txt': text }));
    await assignmentStatus(s.deps, s.machine.id, s.status(id, 'finished', { ...exit, outputs: [{ path: '/output', name: 'output-0', sha256: output.sha256, sizeBytes: output.sizeBytes }] }));
    t.equal((await s.job()).verificationLevel, right ? 'RESULT_VERIFIED' : 'HOST_REPORTED', right ? 'recomputed and equal' : 'recomputed and different');
  }
});

t.test('behavior: the canary result is recomputed only for a job created with deterministic: true; the job records the declaration', async (t) => {
  for (const deterministic of [true, false]) {
    const s = await setup(t, { image: `127.0.0.1:5000/gpufarm/canary@${CANARY_DIGEST}`, command: ['sha256-chain', '1000'], deterministic });
    const [row] = await s.db.query<{ deterministic: boolean }>('SELECT deterministic FROM jobs WHERE id = $1', [s.jobId]);
    t.equal(row?.deterministic, deterministic, `deterministic: ${deterministic} is recorded on the job`);
    const id = await s.offer();
    const exit = { imageDigest: CANARY_DIGEST, startedAt: STARTED, finishedAt: FINISHED, exitCode: 0, oomKilled: false, timedOut: false };
    await assignmentStatus(s.deps, s.machine.id, s.status(id, 'running', exit));
    const output = await s.upload(id, 'output-0', await tarOf({ 'result.txt': canaryResult(s.jobId, 1000) }));
    await assignmentStatus(s.deps, s.machine.id, s.status(id, 'finished', { ...exit, outputs: [{ path: '/output', name: 'output-0', sha256: output.sha256, sizeBytes: output.sizeBytes }] }));
    t.equal((await s.job()).verificationLevel, deterministic ? 'RESULT_VERIFIED' : 'HOST_REPORTED', deterministic ? 'recomputed' : 'not recomputed: as the machine reports it');
    const verified = (await s.lines()).find((l) => l.startsWith('verified:'));
    t.equal(verified?.includes('the canary result is recomputed only for a job created with deterministic: true'), !deterministic, 'the line says why when it was not recomputed');
  }
});

t.test('a host hash that differs from the stored bytes: hashesMatch false, HOST_REPORTED, counted against the machine', async (t) => {
  const s = await setup(t);
  const id = await s.offer();
  const exit = { imageDigest: BUSYBOX_DIGEST, startedAt: STARTED, finishedAt: FINISHED, exitCode: 0, oomKilled: false, timedOut: false };
  await assignmentStatus(s.deps, s.machine.id, s.status(id, 'running', exit));
  const lie = 'f'.repeat(64);
  const output = await s.upload(id, 'output-0', await tarOf({ 'a.txt': 'x' }), lie);
  await assignmentStatus(s.deps, s.machine.id, s.status(id, 'finished', { ...exit, outputs: [{ path: '/output', name: 'output-0', sha256: lie, sizeBytes: output.sizeBytes }] }));
  const job = await s.job();
  t.equal(job.verificationLevel, 'HOST_REPORTED');
  t.same([job.result?.hostHash, job.result?.serverHash, job.result?.hashesMatch], [lie, output.serverSha256, false]);
  const [machine] = await s.db.query<{ hash_mismatches: number }>('SELECT hash_mismatches FROM machines WHERE id = $1', [s.machine.id]);
  t.equal(machine!.hash_mismatches, 1);
  t.ok((await s.lines()).some((l) => l.startsWith('hash mismatch')));
});

t.test('a timeout: TIMED_OUT, billed for the runtime (capped at maxRuntimeSeconds)', async (t) => {
  const s = await setup(t, { maxRuntimeSeconds: 60 });
  const id = await s.offer();
  const exit = { imageDigest: BUSYBOX_DIGEST, startedAt: STARTED, finishedAt: FINISHED, exitCode: 137, oomKilled: false, timedOut: true };
  s.serverAt(RECEIVED_START);
  await assignmentStatus(s.deps, s.machine.id, s.status(id, 'running', exit));
  s.serverAt(RECEIVED_END);
  await assignmentStatus(s.deps, s.machine.id, s.status(id, 'exited', exit));
  const output = await s.upload(id, 'output-0', await tarOf({}));
  await assignmentStatus(s.deps, s.machine.id, s.status(id, 'finished', { ...exit, outputs: [{ path: '/output', name: 'output-0', sha256: output.sha256, sizeBytes: output.sizeBytes }] }));
  const job = await s.job();
  t.equal(job.status, 'TIMED_OUT');
  t.equal(job.cost?.billableGpuSeconds, 60, '95 s seen, 90 s reported, 60 s the limit');
  t.ok((await s.lines()).some((l) => l.startsWith('timed out: 60 billable GPU-seconds')));
});

t.test('infrastructure failures: requeued twice, failed the third time, refund pending; a wrong digest fails at once', async (t) => {
  const s = await setup(t);
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const id = await s.offer();
    await assignmentAccepted(s.deps, s.machine.id, id);
    await assignmentStatus(s.deps, s.machine.id, s.status(id, 'failed', { failure: { code: 'pull_failed', message: 'manifest unknown' } }));
    const [row] = await s.db.query<{ status: string; attempts: number; refund_status: string | null; assignment_id: string | null }>('SELECT status, attempts, refund_status, assignment_id FROM jobs WHERE id = $1', [s.jobId]);
    t.same(row, { status: attempt < MAX_ATTEMPTS ? 'QUEUED' : 'FAILED', attempts: attempt, refund_status: attempt < MAX_ATTEMPTS ? null : 'pending', assignment_id: null }, `attempt ${attempt}`);
    t.equal(await s.freeGpus(), 1);
  }
  const said = await s.lines();
  t.equal(said.filter((l) => l.includes('queued again')).length, 2);
  t.ok(said.some((l) => l.startsWith('failed: the image could not be pulled: manifest unknown (after 3 attempts)')), said.join('\n'));
  const job = await s.job();
  t.equal(job.cost, null, 'a failed job is never charged');

  const d = await setup(t);
  const id = await d.offer();
  await assignmentStatus(d.deps, d.machine.id, d.status(id, 'failed', { failure: { code: 'digest_mismatch', message: 'the registry serves sha256:…' } }));
  t.equal((await d.job()).status, 'FAILED', 'a wrong digest is not retried');
});

t.test('behavior: a run whose container lost its GPUs (gpu_lost): queued again, the machine excluded, the job\'s log says why, nothing charged', async (t) => {
  const s = await setup(t);
  const id = await s.offer();
  await assignmentAccepted(s.deps, s.machine.id, id);
  await assignmentStatus(s.deps, s.machine.id, s.status(id, 'running', { startedAt: STARTED }));
  const message = 'the job\'s container lost access to its GPUs (nvidia-smi -L in it said "Failed to initialize NVML: Unknown Error") after the machine\'s Docker daemon restarted or systemd reloaded its units';
  await assignmentStatus(s.deps, s.machine.id, s.status(id, 'failed', { failure: { code: 'gpu_lost', message } }));
  const [row] = await s.db.query<{ status: string; attempts: number; assignment_id: string | null }>('SELECT status, attempts, assignment_id FROM jobs WHERE id = $1', [s.jobId]);
  t.same(row, { status: 'QUEUED', attempts: 1, assignment_id: null }, 'retried on another machine');
  t.same(await s.db.query('SELECT reason FROM job_exclusions WHERE job_id = $1 AND machine_id = $2', [s.jobId, s.machine.id]), [{ reason: 'gpu_lost' }], 'not on this machine again');
  t.equal(await s.freeGpus(), 1);
  t.ok((await s.lines()).includes(`attempt 1 of ${MAX_ATTEMPTS} failed: the job's container lost access to its GPUs on the machine: ${message}; queued again`), (await s.lines()).join('\n'));
  t.equal((await s.job()).cost, null, 'the lost run is not charged');
  const [asg] = await s.db.query<{ state: string; failure_code: string }>('SELECT state, failure_code FROM assignments WHERE id = $1', [id]);
  t.same(asg, { state: 'failed', failure_code: 'gpu_lost' });
});

t.test('a rejection or a lost machine: back to QUEUED, the machine excluded for the job, GPUs free; a report from another machine is ignored', async (t) => {
  const s = await setup(t);
  const first = await s.offer();
  await assignmentStatus(s.deps, 'mach_someone_else', s.status(first, 'running', { startedAt: STARTED }));
  t.equal((await s.job()).status, 'MATCHING', 'not its machine: ignored');
  await assignmentRejected(s.deps, s.machine.id, first, 'gpus_unavailable', 'busy');
  t.equal((await s.job()).status, 'QUEUED');
  t.equal(await s.freeGpus(), 1);
  const excluded = await s.db.query('SELECT reason FROM job_exclusions WHERE job_id = $1 AND machine_id = $2', [s.jobId, s.machine.id]);
  t.same(excluded, [{ reason: 'gpus_unavailable' }]);

  await s.db.query('DELETE FROM job_exclusions WHERE job_id = $1', [s.jobId]);
  await s.db.query(`UPDATE jobs SET status = 'QUEUED' WHERE id = $1`, [s.jobId]);
  const second = await s.offer();
  await assignmentStatus(s.deps, s.machine.id, s.status(second, 'running', { startedAt: STARTED }));
  await assignmentLost(s.deps, second, 'no heartbeat for 5 minutes');
  const [row] = await s.db.query<{ status: string; attempts: number }>('SELECT status, attempts FROM jobs WHERE id = $1', [s.jobId]);
  t.same(row, { status: 'QUEUED', attempts: 2 }, 'one rejection and one loss: a third assignment may follow');
  t.equal((await s.db.query('SELECT 1 FROM job_exclusions WHERE job_id = $1', [s.jobId])).length, 1, 'the lost machine is excluded');
  t.ok((await s.lines()).some((l) => l.includes('the machine stopped answering: no heartbeat for 5 minutes')));
});

t.test('behavior: a rejection for image_cache_full (protocol 8) requeues the job and excludes the machine', async (t) => {
  const s = await setup(t);
  const id = await s.offer();
  await assignmentRejected(s.deps, s.machine.id, id, 'image_cache_full', 'the image r@sha256:… (9.1 GiB on disk) does not fit this machine\'s image cache budget (image_cache_bytes, 8.0 GiB) beside the 2.0 GiB that running and assigned jobs\' images take');
  t.equal((await s.job()).status, 'QUEUED');
  t.equal(await s.freeGpus(), 1);
  t.same(await s.db.query('SELECT reason FROM job_exclusions WHERE job_id = $1 AND machine_id = $2', [s.jobId, s.machine.id]), [{ reason: 'image_cache_full' }]);
  t.ok((await s.lines()).includes('not started: the machine declined (image_cache_full); queued again for another machine'), (await s.lines()).join('\n'));
});

t.test('behavior: two replicas\' liveness sweeps (two pools) acting on the same lost run and the same unanswered offer change each once', async (t) => {
  const { db, url } = await createPostgresTestDatabase(t);
  const s = await setup(t, { db });
  const other = openPostgres(url!);
  t.teardown(() => other.close());
  const replicas: ExecutionDeps[] = [s.deps, { ...s.deps, db: other }];
  const lost = await s.offer();
  await assignmentStatus(s.deps, s.machine.id, s.status(lost, 'running', { startedAt: STARTED }));
  await Promise.all(replicas.flatMap((deps) => [assignmentLost(deps, lost, 'no heartbeat for 5 minutes'), assignmentLost(deps, lost, 'no heartbeat for 5 minutes')]));
  t.equal((await s.job()).status, 'QUEUED');
  t.equal((await s.lines()).filter((l) => l.includes('the machine stopped answering')).length, 1, 'one failed attempt recorded');

  await s.db.query('DELETE FROM job_exclusions WHERE job_id = $1', [s.jobId]);
  const unanswered = await s.offer();
  const timeout = (deps: ExecutionDeps) => assignmentRejected(deps, s.machine.id, unanswered, 'timeout', 'the machine did not accept the assignment within 30 s');
  await Promise.all(replicas.flatMap((deps) => [timeout(deps), timeout(deps)]));
  const [row] = await s.db.query<{ status: string; attempts: number }>('SELECT status, attempts FROM jobs WHERE id = $1', [s.jobId]);
  t.same(row, { status: 'QUEUED', attempts: 2 }, 'back in the queue once');
  t.equal(await s.freeGpus(), 1, 'the GPU freed once');
  t.same(await s.db.query('SELECT reason FROM job_exclusions WHERE job_id = $1', [s.jobId]), [{ reason: 'timeout' }], 'one exclusion');
});
