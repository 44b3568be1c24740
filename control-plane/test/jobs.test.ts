import { jobCreatedSchema, jobSchema, listEnvelopeSchema } from '@gpufarm/shared';
import t, { type Test } from 'tap';
import { createFarm, createMachine } from '../src/testing/factories.js';
import type { Database } from '../src/db/database.js';
import { encodeAbiParameters, keccak256, stringToBytes, type Address } from 'viem';
import { TRANSITIONS, transitionFor, ForbiddenTransitionError } from '../src/jobs/transitions.js';
import { bearer, buildTestApp, createTestKey, type TestApp } from './helpers/app.js';
import { assertError } from './helpers/assert.js';
import { createPgliteTestDatabase } from './helpers/database.js';

/** 4090s: ×4 at $0.40 (60 s billing), ×2 at $0.30 (too small for 4), ×8 at $0.50 (120 s billing). */
async function smallFleet(db: Database): Promise<void> {
  const farm = await createFarm(db, { slug: 'north-farm' });
  const base = { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb' };
  await createMachine(db, { ...base, gpuCount: 4, pricePerGpuHourMicroUsd: 400_000 });
  await createMachine(db, { ...base, gpuCount: 2, pricePerGpuHourMicroUsd: 300_000 });
  await createMachine(db, { ...base, gpuCount: 8, pricePerGpuHourMicroUsd: 500_000, minBillingSeconds: 120 });
  await createMachine(db, { ...base, classId: 'h100-80gb-sxm', regionKey: 'europe-west', gpuCount: 8, pricePerGpuHourMicroUsd: 2_500_000 });
}

async function setup(t: Test, options: { db?: Database } = {}): Promise<TestApp & { key: string; walletAddress: string }> {
  const app = await buildTestApp(t, options);
  await smallFleet(app.db);
  await app.offerIndex.refresh();
  const created = await createTestKey(app.db);
  return { ...app, key: created.key, walletAddress: created.walletAddress };
}

const body = (extra: Record<string, unknown> = {}) => ({ image: 'ghcr.io/acme/trainer:1.2', gpu: { count: 4, modelAllowlist: ['rtx-4090-24gb'] }, ...extra });

t.test('transitions: every row is found, a forbidden move throws', async (t) => {
  for (const row of TRANSITIONS) t.equal(transitionFor(row.from, row.event).to, row.to, `${row.from} --${row.event}--> ${row.to}`);
  t.throws(() => transitionFor('RUNNING', 'cancel'), ForbiddenTransitionError);
  t.throws(() => transitionFor('COMPLETED', 'start'), ForbiddenTransitionError);
  t.same(transitionFor('QUEUED', 'cancel').effects, ['authorize_refund'], 'a paid job’s cancel authorizes the refund');
  t.same(transitionFor('CREATED', 'cancel').effects, [], 'an unpaid one refunds nothing');
});

t.test('default: a job is created, priced against live capacity, with every default listed', async (t) => {
  const { app, key, walletAddress } = await setup(t);
  const res = await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: body({ estRuntime: { minSeconds: 600, maxSeconds: 1800 } }) });
  t.equal(res.statusCode, 201);
  const created = jobCreatedSchema.parse(res.json());
  const { job, estimate } = created;
  t.equal(job.status, 'CREATED');
  t.equal(job.verificationLevel, null);
  t.same(created.policy, { verdict: 'allowed', findings: [] });
  t.equal(created.funding, null);
  t.equal(created.fundingUnavailable?.code, 'escrow_not_deployed');
  t.equal(created.idempotentReplay, false);
  // Default cap: the highest price among machines that fit all 4 GPUs ($0.40 and $0.50; the ×2 does not fit).
  t.same(job.pricing, {
    maxPricePerGpuHourMicroUsd: 500_000,
    minBillingSeconds: 120,
    platformFeeBps: 1000,
    estimateLowMicroUsd: 293_334, // ceil(400000*4*600/3600)=266667, +10% fee rounded up
    estimateHighMicroUsd: 1_100_000, // 500000*4*1800/3600 + 10%
    maxCostMicroUsd: 2_200_000, // 500000*4*3600/3600 + 10%
  });
  t.same(estimate.matchedClasses, ['rtx-4090-24gb']);
  t.equal(estimate.lowMicroUsd, 293_334);
  t.equal(estimate.highMicroUsd, 1_100_000);
  t.same(job.payment, {
    token: '0x0000000000000000000000000000000000000000',
    symbol: 'ETH',
    decimals: 18,
    maxPayment: '733333333333333', // ceil(2200000 * 333333333333333 / 1e6)
    // Computed independently, as the contract does: keccak256(abi.encode(wallet, keccak256(jobId))).
    escrowJobKey: keccak256(encodeAbiParameters([{ type: 'address' }, { type: 'bytes32' }], [walletAddress as Address, keccak256(stringToBytes(job.id))])),
  });
  t.same(created.defaults.map((d) => d.field).sort(), ['maxPricePerGpuHourMicroUsd', 'maxRuntimeSeconds', 'networkPolicy', 'outputRules', 'paymentToken', 'workloadType']);
  t.same(created.defaults.find((d) => d.field === 'outputRules')?.value, [{ path: '/output', maxBytes: 1073741824 }]);

  const read = await app.inject({ url: `/v1/jobs/${job.id}`, headers: bearer(key) });
  t.same(jobSchema.parse(read.json()), job, 'GET returns the same job');
});

t.test('args: an explicit cap prices the estimate and max cost; stable pays micro-USD as base units', async (t) => {
  const app = await buildTestApp(t, { env: { GF_STABLE_TOKEN_ADDRESS: '0x' + 'ab'.repeat(20) } });
  await smallFleet(app.db);
  await app.offerIndex.refresh();
  const { key } = await createTestKey(app.db);
  const res = await app.app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: body({ maxPricePerGpuHour: '0.45', paymentToken: 'stable' }) });
  t.equal(res.statusCode, 201);
  const { job, estimate, defaults } = jobCreatedSchema.parse(res.json());
  t.equal(job.pricing.maxPricePerGpuHourMicroUsd, 450_000);
  t.equal(job.pricing.maxCostMicroUsd, 1_980_000);
  // Matched under $0.45: only the ×4 at $0.40 (60 s billing). No estRuntime: from the minimum billing to maxRuntimeSeconds.
  t.equal(job.pricing.minBillingSeconds, 60);
  t.equal(estimate.lowMicroUsd, 29_334, 'ceil(400000*4*60/3600)=26667, +10%');
  t.equal(estimate.highMicroUsd, 1_760_000, '400000*4*3600/3600, +10%');
  t.equal(job.payment.maxPayment, '1980000');
  t.equal(job.payment.symbol, 'USDC');
  t.notOk(defaults.some((d) => d.field === 'maxPricePerGpuHourMicroUsd'), 'an explicit cap is no default');
});

t.test('error: validation_error when nothing fits and no cap was given', async (t) => {
  const { app, key } = await setup(t);
  const tooMany = await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: body({ gpu: { count: 16 } }) });
  assertError(t, tooMany, 'validation_error', 422);
  t.same(tooMany.json().error.details.map((d: { field: string }) => d.field), ['gpu']);
  t.match(tooMany.json().error.message, /no machine offered now has 16 GPU/);
  const stable = await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: body({ paymentToken: 'stable' }) });
  t.same(stable.json().error.details.map((d: { field: string }) => d.field), ['paymentToken'], 'no stablecoin configured');
  const input = await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: body({ inputs: [{ artifactId: 'art_x', mountName: 'data' }] }) });
  t.same(input.json().error.details.map((d: { field: string }) => d.field), ['inputs[0].artifactId'], 'only the caller’s own artifacts');
});

t.test('args: gpu.proven prices against machines that proved their GPUs only', async (t) => {
  const { app, db, offerIndex, key } = await setup(t);
  const proven = (extra: Record<string, unknown> = {}) => body({ gpu: { count: 4, modelAllowlist: ['rtx-4090-24gb'], proven: true }, ...extra });
  const none = await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: proven() });
  assertError(t, none, 'validation_error', 422);
  t.same(none.json().error.details.map((d: { field: string }) => d.field), ['gpu'], 'no proven machine: no price to default the cap to');
  t.match(none.json().error.message, /gpu\.proven/);
  const invalid = await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: body({ gpu: { count: 4, proven: 'yes' } }) });
  assertError(t, invalid, 'validation_error', 422);
  t.same(invalid.json().error.details.map((d: { field: string }) => d.field), ['gpu.proven']);

  await db.query(`UPDATE machines SET proven_at = now() WHERE price_per_gpu_hour_micro_usd = 400000`);
  await offerIndex.refresh();
  const res = await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: proven() });
  t.equal(res.statusCode, 201);
  t.equal(jobCreatedSchema.parse(res.json()).job.pricing.maxPricePerGpuHourMicroUsd, 400_000, 'the cap defaults to the proven ×4 at $0.40, not the unproven ×8 at $0.50');
  const any = await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: body() });
  t.equal(jobCreatedSchema.parse(any.json()).job.pricing.maxPricePerGpuHourMicroUsd, 500_000, 'without gpu.proven, every machine');
});

t.test('behavior: with a cap and nothing matching now, the job is created and waits for capacity', async (t) => {
  const { app, key } = await setup(t);
  const cheap = await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: body({ maxPricePerGpuHour: 0.39, estRuntime: { minSeconds: 600, maxSeconds: 1800 } }) });
  t.equal(cheap.statusCode, 201);
  const created = jobCreatedSchema.parse(cheap.json());
  t.same(created.estimate.matchedClasses, []);
  t.match(created.estimate.assumptions.join('\n'), /the cheapest costs 0\.4\); it waits for capacity/);
  t.equal(created.job.pricing.maxPricePerGpuHourMicroUsd, 390_000);
  t.equal(created.estimate.lowMicroUsd, 286_000, 'at the cap: 390000*4*600/3600 = 260000, +10%');
  t.equal(created.job.pricing.maxCostMicroUsd, 1_716_000, '390000*4 for an hour, +10%');
  const nothing = await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: body({ gpu: { count: 16 }, maxPricePerGpuHourMicroUsd: 3_000_000 }) });
  t.equal(nothing.statusCode, 201);
  t.match(nothing.json().estimate.assumptions.join('\n'), /no machine offered now fits the whole job \(machines have at most \d+ GPU\(s\) each; the job asks 16 on one machine \(gpu\.count\)\); it waits for capacity/, 'and says why');
  t.notMatch(created.job.id, /^job_01/, 'ids are random, not time-ordered');
});

t.test('behavior: a job no machine fits is created with a cap, and its estimate says which requirement rules every machine out', async (t) => {
  const { app, key } = await setup(t);
  const why = async (extra: Record<string, unknown>) => {
    const res = await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: body({ maxPricePerGpuHour: 3, ...extra }) });
    t.equal(res.statusCode, 201, res.body);
    return jobCreatedSchema.parse(res.json()).estimate.assumptions.join('\n');
  };
  t.match(await why({ gpu: { count: 1, modelAllowlist: ['a100-80gb'] } }), /fits the whole job \(no machine of a100-80gb is offered now\)/, 'a class nobody offers');
  t.match(await why({ gpu: { count: 1, minimumVramGb: 100 } }), /\(the most memory per GPU offered is 80 GB; the job asks at least 100 GB \(gpu\.minimumVramGb\)\)/, 'more memory than any GPU has');
  t.notMatch(await why({ gpu: { count: 2, minimumVramGb: 40 } }), /no machine offered now fits/, 'two 80 GB GPUs fit the H100 machine: no reason given');
  t.match(await why({ gpu: { count: 12, modelAllowlist: ['rtx-4090-24gb'] } }), /\(machines of rtx-4090-24gb have at most 8 GPU\(s\) each; the job asks 12 on one machine \(gpu\.count\)\)/, 'more GPUs than one machine has');
  t.match(await why({ gpu: { count: 1, proven: true } }), /\(no machine that fits has proven its GPUs \(gpu\.proven\)\)/, 'proven GPUs only');
});

t.test('error: policy_rejected lists the findings', async (t) => {
  const { app, key } = await setup(t);
  const res = await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: body({ image: 'xmrig/xmrig:6.21.0' }) });
  assertError(t, res, 'policy_rejected', 422);
  t.equal(res.json().error.details[0].field, 'image');
  t.match(res.json().error.details[0].message, /^banned_image: /, 'each detail names its rule');
});

t.test('args: GF_BANNED_IMAGES adds the operator’s own list', async (t) => {
  const app = await buildTestApp(t, { env: { GF_BANNED_IMAGES: 'acme/forbidden,evil/*' } });
  await smallFleet(app.db);
  await app.offerIndex.refresh();
  const { key } = await createTestKey(app.db);
  for (const image of ['acme/forbidden:1.0', 'registry.example.com/evil/anything']) {
    const res = await app.app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: body({ image }) });
    assertError(t, res, 'policy_rejected', 422);
  }
  const fine = await app.app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: body({ image: 'acme/allowed:1.0' }) });
  t.equal(fine.statusCode, 201);
});

t.test('behavior: Idempotency-Key replays the first response, refuses another body, and a double submit makes one job', async (t) => {
  const { app, db, key } = await setup(t);
  const headers = { ...bearer(key), 'idempotency-key': 'order-42' };
  const first = await app.inject({ method: 'POST', url: '/v1/jobs', headers, payload: body() });
  t.equal(first.statusCode, 201);
  const replay = await app.inject({ method: 'POST', url: '/v1/jobs', headers, payload: body() });
  t.equal(replay.statusCode, 200);
  t.equal(replay.json().idempotentReplay, true);
  t.same({ ...replay.json(), idempotentReplay: false }, first.json(), 'the original response');
  // Key order does not make a different body.
  const reordered = await app.inject({ method: 'POST', url: '/v1/jobs', headers, payload: { gpu: { modelAllowlist: ['rtx-4090-24gb'], count: 4 }, image: 'ghcr.io/acme/trainer:1.2' } });
  t.equal(reordered.statusCode, 200);
  const other = await app.inject({ method: 'POST', url: '/v1/jobs', headers, payload: body({ title: 'another' }) });
  assertError(t, other, 'conflict', 409);

  const racing = { ...bearer(key), 'idempotency-key': 'race-1' };
  const answers = await Promise.all(Array.from({ length: 6 }, () => app.inject({ method: 'POST', url: '/v1/jobs', headers: racing, payload: body() })));
  t.same(answers.map((a) => a.statusCode).sort(), [200, 200, 200, 200, 200, 201]);
  t.equal(new Set(answers.map((a) => a.json().job.id)).size, 1, 'one job for all');
  const [{ n }] = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM jobs')) as [{ n: number }];
  t.equal(n, 2, 'order-42 and race-1: two jobs in all');
  assertError(t, await app.inject({ method: 'POST', url: '/v1/jobs', headers: { ...bearer(key), 'idempotency-key': 'has space' }, payload: body() }), 'invalid_request', 400);
});

t.test('behavior: creations that arrive together are stored together, each as its own job', async (t) => {
  // On PGlite too: the embedded default of npm start takes the same batched insert.
  const { db: pglite } = await createPgliteTestDatabase(t);
  for (const backendDb of [undefined, pglite]) await createdTogether(t, await setup(t, { db: backendDb }));
});

async function createdTogether(t: Test, { app, db }: TestApp): Promise<void> {
  const keys = await Promise.all(Array.from({ length: 4 }, () => createTestKey(db)));
  // Each call has its own price cap, so an answer shows whose job it is.
  const sent = Array.from({ length: 20 }, (_, i) => ({ key: keys[i % keys.length]!, cap: 1_000_000 + i }));
  const answers = await Promise.all(
    sent.map(({ key, cap }) => app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key.key), payload: body({ maxPricePerGpuHourMicroUsd: cap }) })),
  );
  t.same(answers.map((a) => a.statusCode), sent.map(() => 201));
  for (const [i, answer] of answers.entries()) {
    const created = jobCreatedSchema.parse(answer.json());
    t.equal(created.job.pricing.maxPricePerGpuHourMicroUsd, sent[i]!.cap, 'each caller gets its own job back');
    const read = await app.inject({ url: `/v1/jobs/${created.job.id}`, headers: bearer(sent[i]!.key.key) });
    t.same(read.json(), created.job, 'and it reads back as created, on the account of the key that made it');
  }
  const rows = await db.query<{ seq: number }>('SELECT seq FROM jobs');
  t.equal(new Set(rows.map((r) => r.seq)).size, 20, `twenty rows on ${db.kind}, each with its own place in the order`);
}

t.test('behavior: list and read only the account’s own jobs', async (t) => {
  const { app, db, key } = await setup(t);
  const other = await createTestKey(db);
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push((await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: body() })).json().job.id);
  const foreign = (await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(other.key), payload: body() })).json().job.id;
  await db.query(`UPDATE jobs SET status = 'QUEUED' WHERE id = $1`, [ids[1]!]);

  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const res = await app.inject({ url: `/v1/jobs?limit=2${cursor ? `&cursor=${cursor}` : ''}`, headers: bearer(key) });
    const page = listEnvelopeSchema(jobSchema).parse(res.json());
    seen.push(...page.data.map((j) => j.id));
    cursor = page.nextCursor;
  } while (cursor);
  t.same(seen, [...ids].reverse(), 'newest first, each once, no other account’s');
  const queued = await app.inject({ url: '/v1/jobs?status=QUEUED,RUNNING', headers: bearer(key) });
  t.same(queued.json().data.map((j: { id: string }) => j.id), [ids[1]]);
  assertError(t, await app.inject({ url: '/v1/jobs?status=DONE', headers: bearer(key) }), 'invalid_request', 400);
  assertError(t, await app.inject({ url: '/v1/jobs?limit=101', headers: bearer(key) }), 'invalid_request', 400);
  assertError(t, await app.inject({ url: `/v1/jobs/${foreign}`, headers: bearer(key) }), 'not_found', 404);
  assertError(t, await app.inject({ method: 'POST', url: `/v1/jobs/${foreign}/cancel`, headers: bearer(key), payload: {} }), 'not_found', 404);
  assertError(t, await app.inject({ url: '/v1/jobs/not-a-job', headers: bearer(key) }), 'invalid_request', 400);
  const readOnly = await createTestKey(db, { scopes: ['jobs:read'] });
  assertError(t, await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(readOnly.key), payload: body() }), 'insufficient_scope', 403);
});

t.test('behavior: cancel follows the transition table', async (t) => {
  const { app, db, key } = await setup(t);
  const expected: Record<string, number> = {
    CREATED: 200, FUNDED: 200, QUEUED: 200, MATCHING: 200, CANCELED: 200,
    RUNNING: 409, COMPLETED: 409, FAILED: 409, TIMED_OUT: 409, EXPIRED: 409,
  };
  for (const [status, code] of Object.entries(expected)) {
    const id = (await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: body() })).json().job.id;
    await db.query('UPDATE jobs SET status = $2 WHERE id = $1', [id, status]);
    const res = await app.inject({ method: 'POST', url: `/v1/jobs/${id}/cancel`, headers: bearer(key), payload: { reason: 'changed my mind' } });
    if (code === 200) {
      t.equal(res.statusCode, 200, `${status}: canceled`);
      t.equal(res.json().status, 'CANCELED');
    } else {
      assertError(t, res, 'conflict', 409);
    }
    const [row] = await db.query<{ status: string; cancel_reason: string | null }>('SELECT status, cancel_reason FROM jobs WHERE id = $1', [id]);
    t.equal(row?.status, code === 200 ? 'CANCELED' : status, `${status}: stored status`);
  }
  const id = (await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: body() })).json().job.id;
  const noBody = await app.inject({ method: 'POST', url: `/v1/jobs/${id}/cancel`, headers: bearer(key) });
  t.equal(noBody.statusCode, 200, 'reason is optional');
  const tooLong = await app.inject({ method: 'POST', url: `/v1/jobs/${id}/cancel`, headers: bearer(key), payload: { reason: 'x'.repeat(501) } });
  assertError(t, tooLong, 'invalid_request', 400);
});
