import { createHash, randomBytes } from 'node:crypto';
import t from 'tap';
import { artifactMetadataSchema, assignmentSpecSchema } from '@gpufarm/shared';
import { hashAgentToken, newAgentToken } from '../src/auth/machine-tokens.js';
import { agentInputUrl } from '../src/artifacts/agent-upload.js';
import { resolveJobInputs } from '../src/artifacts/inputs.js';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { matchQueuedJobs, type ResolveInputs } from '../src/matching/matcher.js';
import { assertError } from './helpers/assert.js';
import { bearer, buildTestApp, createTestKey } from './helpers/app.js';

/**
 * Job inputs end to end inside the control plane: an upload (`POST /v1/artifacts`) named by a
 * job's `inputs`, checked at creation against the account and expiry, and handed to the machine
 * as the route of its signed URL (120 s, asked for at download) with its hash when the job is matched.
 */

t.test('inputs: an uploaded file can be named; another account’s, an unknown or an expired one is a validation_error on its field', async (t) => {
  const { app, db, config, offerIndex } = await buildTestApp(t);
  const farm = await createFarm(db);
  const machine = await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 });
  const token = newAgentToken('gfa');
  await db.query('UPDATE machines SET token_hash = $2 WHERE id = $1', [machine.id, hashAgentToken(token)]);
  await db.query(`UPDATE machine_gpus SET uuid = 'GPU-0' WHERE machine_id = $1`, [machine.id]);
  await offerIndex.refresh();
  const mine = await createTestKey(db);
  const theirs = await createTestKey(db);
  const bytes = randomBytes(4096);
  const upload = async (key: string) =>
    artifactMetadataSchema.parse((await app.inject({ method: 'POST', url: '/v1/artifacts?filename=weights.bin', headers: { ...bearer(key), 'content-type': 'application/octet-stream' }, payload: bytes })).json());
  const input = await upload(mine.key);
  const foreign = await upload(theirs.key);
  t.equal(input.sha256, createHash('sha256').update(bytes).digest('hex'));

  const refused = async (res: Awaited<ReturnType<typeof create>>) => {
    assertError(t, res, 'validation_error', 422);
    t.ok((res.json() as { error: { details: Array<{ field: string }> } }).error.details.some((d) => d.field === 'inputs[0].artifactId'), 'names inputs[0].artifactId');
  };
  const create = (inputs: unknown) => app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(mine.key), payload: { image: 'busybox@sha256:' + 'a'.repeat(64), gpu: { count: 1 }, inputs } });
  await refused(await create([{ artifactId: foreign.id, mountName: 'data' }]));
  await refused(await create([{ artifactId: 'art_00000000000000000000000000', mountName: 'data' }]));
  await db.query(`UPDATE artifacts SET expires_at = now() - interval '1 second' WHERE id = $1`, [foreign.id]);
  const res = await create([{ artifactId: input.id, mountName: 'data' }]);
  t.equal(res.statusCode, 201, `an own, live upload is accepted: ${res.body.slice(0, 300)}`);
  const jobId = (res.json() as { job: { id: string } }).job.id;

  // Funded and queued, the matcher hands the machine the input's route with its hash; the route
  // gives the machine a signed URL of the bytes, valid 120 s, when it downloads.
  const resolveInputs: ResolveInputs = (tx, job, inputs) => resolveJobInputs(tx, (mountName) => agentInputUrl(config.publicUrl, job.assignmentId, mountName), job.accountId, inputs);
  await db.query(`UPDATE jobs SET status = 'QUEUED' WHERE id = $1`, [jobId]);
  const result = await matchQueuedJobs({ db, resolveInputs });
  t.equal(result.matched.length, 1);
  const [row] = await db.query<{ id: string; spec: unknown }>('SELECT id, spec FROM assignments WHERE job_id = $1', [jobId]);
  const spec = assignmentSpecSchema.parse(row!.spec);
  t.same(spec.inputs.map((i) => [i.mountName, i.artifactId, i.sha256, i.sizeBytes]), [['data', input.id, input.sha256, 4096]]);
  const route = new URL(spec.inputs[0]!.url);
  t.equal(route.pathname, `/agent/v1/assignments/${row!.id}/inputs/data`, 'the assignment carries the route, not a signed URL');
  const before = Date.now();
  const redirect = await app.inject({ method: 'GET', url: route.pathname, headers: { authorization: `Bearer ${token}` } });
  t.equal(redirect.statusCode, 302);
  t.equal(redirect.headers['cache-control'], 'no-store');
  const signed = new URL(String(redirect.headers.location));
  const lifetimeMs = Number(signed.searchParams.get('expires')) * 1000 - before;
  t.ok(lifetimeMs > 110_000 && lifetimeMs <= 121_000, `the signed URL lives the spec's 120 s (${lifetimeMs} ms)`);
  const download = await app.inject({ method: 'GET', url: signed.pathname + signed.search });
  t.equal(download.statusCode, 200);
  t.equal(createHash('sha256').update(download.rawPayload).digest('hex'), input.sha256, 'the URL serves the uploaded bytes');
  assertError(t, await app.inject({ method: 'GET', url: route.pathname }), 'missing_api_key', 401);
  const other = await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 });
  const otherToken = newAgentToken('gfa');
  await db.query('UPDATE machines SET token_hash = $2 WHERE id = $1', [other.id, hashAgentToken(otherToken)]);
  assertError(t, await app.inject({ method: 'GET', url: route.pathname, headers: { authorization: `Bearer ${otherToken}` } }), 'not_found', 404);
  assertError(t, await app.inject({ method: 'GET', url: route.pathname.replace(/data$/, 'other'), headers: { authorization: `Bearer ${token}` } }), 'not_found', 404);

  // A second job names the input while it lives; the input expires while the job waits.
  const waiting = await create([{ artifactId: input.id, mountName: 'data' }]);
  const waitingId = (waiting.json() as { job: { id: string } }).job.id;
  await db.query(`UPDATE artifacts SET expires_at = now() - interval '1 second' WHERE id = $1`, [input.id]);
  await refused(await create([{ artifactId: input.id, mountName: 'data' }]));

  // Matched again with a free GPU, it is canceled with the refund pending instead of waiting forever.
  await db.query(`UPDATE jobs SET status = 'QUEUED' WHERE id = $1`, [waitingId]);
  await db.query(`UPDATE machine_gpus SET busy = false, assignment_id = NULL`);
  const again = await matchQueuedJobs({ db, resolveInputs });
  t.equal(again.matched.length, 0);
  const job = (await app.inject({ method: 'GET', url: `/v1/jobs/${waitingId}`, headers: bearer(mine.key) })).json() as { status: string };
  t.equal(job.status, 'CANCELED');
  const [row2] = await db.query<{ refund_status: string; cancel_reason: string }>('SELECT refund_status, cancel_reason FROM jobs WHERE id = $1', [waitingId]);
  t.equal(row2!.refund_status, 'pending', 'the escrow refund is to be authorized');
  t.equal(row2!.cancel_reason, `input artifact ${input.id} expired; upload it again and create a new job`);
  const logs = (await app.inject({ method: 'GET', url: `/v1/jobs/${waitingId}/logs`, headers: bearer(mine.key) })).json() as { data: Array<{ stream: string; line: string }> };
  t.match(logs.data.at(-1), { stream: 'system', line: /^canceled: input artifact .* expired; upload it again and create a new job; the escrow refund is authorized$/ });
  t.same(await db.query('SELECT 1 FROM assignments WHERE job_id = $1', [waitingId]), [], 'no assignment was made');
});
