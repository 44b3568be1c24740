import { jobCreatedSchema } from '@gpufarm/shared';
import t, { type Test } from 'tap';
import { createOfferIndex } from '../src/capacity/offer-index.js';
import { loadConfig } from '../src/config.js';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { cancelJob } from '../src/jobs/cancel-job.js';
import { createJob, type CreateJobDeps } from '../src/jobs/create-job.js';
import { JobConflictError, JobNotFoundError, JobPolicyRejectedError, JobValidationError } from '../src/jobs/job-errors.js';
import { applyTransition, findJobById } from '../src/jobs/store.js';
import { createTestKey } from './helpers/app.js';
import { createPostgresTestDatabase } from './helpers/database.js';

/**
 * The jobs use cases called directly, as the dashboard will call them: no HTTP, a real
 * PostgreSQL database, a real offer index over factory machines.
 */

async function setup(t: Test) {
  const { db } = await createPostgresTestDatabase(t);
  const farm = await createFarm(db, { slug: 'use-case-farm' });
  await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 4, pricePerGpuHourMicroUsd: 400_000 });
  const offerIndex = createOfferIndex(db, { refreshMs: 60_000 });
  await offerIndex.start();
  t.teardown(() => offerIndex.close());
  const key = await createTestKey(db);
  const principal = { accountId: key.accountId, apiKeyId: key.keyId, walletAddress: key.walletAddress };
  const deps: CreateJobDeps = { db, offerIndex, config: loadConfig({}), escrow: null };
  const canceled: string[] = [];
  const cancelDeps = { db, escrow: null, effects: { canceledWhileMatching: async (jobId: string) => void canceled.push(jobId) } };
  return { db, deps, principal, canceled, cancelDeps };
}

const body = { image: 'ghcr.io/acme/trainer:1.2', gpu: { count: 2 } };

t.test('default: createJob stores a CREATED job, priced, with its defaults listed', async (t) => {
  const { db, deps, principal } = await setup(t);
  const created = jobCreatedSchema.parse(await createJob(deps, { principal, body }));
  t.equal(created.job.status, 'CREATED');
  t.equal(created.idempotentReplay, false);
  t.equal(created.job.pricing.maxPricePerGpuHourMicroUsd, 400_000, 'the cap defaults to the fitting offers’ highest price');
  t.ok(created.defaults.some((d) => d.field === 'maxRuntimeSeconds'));
  const row = await findJobById(db, created.job.id);
  t.equal(row?.account_id, principal.accountId, 'the row is stored on the account');
});

t.test('behavior: createJob with an Idempotency-Key replays the first answer; another body conflicts', async (t) => {
  const { deps, principal } = await setup(t);
  const first = await createJob(deps, { principal, body, idempotencyKey: 'once' });
  const again = await createJob(deps, { principal, body, idempotencyKey: 'once' });
  t.equal(again.job.id, first.job.id);
  t.equal(again.idempotentReplay, true);
  const err = await createJob(deps, { principal, body: { ...body, title: 'other' }, idempotencyKey: 'once' }).catch((e: unknown) => e);
  t.ok(err instanceof JobConflictError);
  t.equal((err as JobConflictError).code, 'conflict');
  t.same((err as JobConflictError).details, [{ field: 'Idempotency-Key', message: 'Idempotency-Key was already used with a different body' }]);
});

t.test('error: validation_error and policy_rejected name their fields', async (t) => {
  const { deps, principal } = await setup(t);
  const invalid = await createJob(deps, { principal, body: { gpu: { count: 2 } } }).catch((e: unknown) => e);
  t.ok(invalid instanceof JobValidationError);
  t.ok((invalid as JobValidationError).details.some((d) => d.field === 'image'));
  const stable = await createJob(deps, { principal, body: { ...body, paymentToken: 'stable' } }).catch((e: unknown) => e);
  t.same((stable as JobValidationError).details, [{ field: 'paymentToken', message: 'paymentToken: this deployment has no stablecoin configured; use eth' }]);
  const refused = await createJob(deps, { principal, body: { image: 'xmrig/xmrig:6.21', gpu: { count: 1 } } }).catch((e: unknown) => e);
  t.ok(refused instanceof JobPolicyRejectedError);
  t.equal((refused as JobPolicyRejectedError).code, 'policy_rejected');
});

t.test('default: cancelJob cancels a CREATED job once; a second cancel returns it as it is', async (t) => {
  const { deps, principal, cancelDeps, canceled } = await setup(t);
  const { job } = await createJob(deps, { principal, body });
  const row = await cancelJob(cancelDeps, { accountId: principal.accountId, jobId: job.id, reason: 'changed my mind' });
  t.equal(row.status, 'CANCELED');
  t.equal(row.cancel_reason, 'changed my mind');
  t.equal((await cancelJob(cancelDeps, { accountId: principal.accountId, jobId: job.id, reason: null })).status, 'CANCELED');
  t.same(canceled, [], 'a CREATED job had no assignment to drop');
});

t.test('behavior: cancelJob of a MATCHING job tells execution to drop its assignment', async (t) => {
  const { db, deps, principal, cancelDeps, canceled } = await setup(t);
  const { job } = await createJob(deps, { principal, body });
  for (const [from, to] of [['CREATED', 'FUNDED'], ['FUNDED', 'QUEUED'], ['QUEUED', 'MATCHING']] as const) {
    t.ok(await applyTransition(db, { jobId: job.id, from, to }), `${from} -> ${to}`);
  }
  t.equal((await cancelJob(cancelDeps, { accountId: principal.accountId, jobId: job.id, reason: null })).status, 'CANCELED');
  t.same(canceled, [job.id]);
});

t.test('error: cancelJob of a RUNNING job is a conflict; of another account’s job, not found', async (t) => {
  const { db, deps, principal, cancelDeps } = await setup(t);
  const { job } = await createJob(deps, { principal, body });
  for (const [from, to] of [['CREATED', 'FUNDED'], ['FUNDED', 'QUEUED'], ['QUEUED', 'MATCHING'], ['MATCHING', 'RUNNING']] as const) {
    await applyTransition(db, { jobId: job.id, from, to });
  }
  const running = await cancelJob(cancelDeps, { accountId: principal.accountId, jobId: job.id, reason: null }).catch((e: unknown) => e);
  t.ok(running instanceof JobConflictError);
  t.equal((running as JobConflictError).message, 'The job is running and cannot be canceled; it stops at maxRuntimeSeconds.');
  t.same((running as JobConflictError).details, [{ field: 'status', message: 'status is RUNNING' }]);
  const other = await createTestKey(db);
  const hidden = await cancelJob(cancelDeps, { accountId: other.accountId, jobId: job.id, reason: null }).catch((e: unknown) => e);
  t.ok(hidden instanceof JobNotFoundError);
  t.equal((hidden as JobNotFoundError).message, `No job ${job.id} on this account.`);
});
