import type { ImageCacheReport } from '@gpufarm/shared';
import t from 'tap';
import { privateKeyToAccount } from 'viem/accounts';
import { writeImageReport } from '../src/agent-gateway/image-store.js';
import { claimEnrollmentToken } from '../src/farms/store.js';
import { hashAgentToken } from '../src/auth/machine-tokens.js';
import { ANVIL_ACCOUNTS } from '../src/testing/anvil.js';
import { createChallenge, createFarm, createMachine } from '../src/testing/factories.js';
import { releaseAssignmentGpus, reserveMatchedGpus } from '../src/machines/gpus-store.js';
import { createJobOwner, createQueuedJobs } from '../src/testing/job-factories.js';
import { recordPhases } from '../src/phases/record.js';
import { recordOffers } from '../src/phases/store.js';
import { insertAssignment, insertJob } from './helpers/agent-client.js';
import { assertError } from './helpers/assert.js';
import { contractChecked } from './helpers/fleet-contract.js';
import { buildWebTestApp, devWallet, HOST, PUBLIC_URL, session, signIn, type SiweSigner } from './helpers/web.js';

const payout = devWallet(1);
const staff = devWallet(2);
const rival = devWallet(3);
const customerAccount = privateKeyToAccount(ANVIL_ACCOUNTS[4].privateKey);
const customer: SiweSigner = { address: customerAccount.address, signMessage: (message) => customerAccount.signMessage({ message }) };

/** Two farms: north (payout wallet, one listed operator) with two machines, and a rival's farm with one. */
async function twoFarms(t: Parameters<typeof buildWebTestApp>[0]) {
  const built = await buildWebTestApp(t);
  const { app, checked } = contractChecked(built.app);
  const test = { ...built, app, checkedAnswers: checked };
  const { db } = test;
  const north = await createFarm(db, { slug: 'north-farm', payoutAddress: payout.address });
  const other = await createFarm(db, { slug: 'rival-farm', payoutAddress: rival.address });
  await db.query('INSERT INTO farm_operators (farm_id, wallet_address) VALUES ($1, $2)', [north.id, staff.address.toLowerCase()]);
  const priced = await createMachine(db, { farmId: north.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 });
  const unpriced = await createMachine(db, { farmId: north.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: null });
  const rivals = await createMachine(db, { farmId: other.id, regionKey: 'europe-west', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 300_000 });
  await test.offerIndex.refresh();
  return { ...test, north, other, priced, unpriced, rivals };
}

t.test('default: an operator sees its machines with their verdicts and the market, sets prices, makes and revokes tokens', async (t) => {
  const { app, db, north, priced, unpriced, checkedAnswers } = await twoFarms(t);
  const me = await signIn(app, payout);

  const list = await app.inject({ url: '/operator/api/machines', headers: session(me) });
  t.equal(list.statusCode, 200, list.body);
  const byId = new Map(list.json().data.map((m: { id: string }) => [m.id, m]));
  t.same([...byId.keys()].sort(), [priced.id, unpriced.id].sort(), 'only its own machines');
  t.match(byId.get(priced.id), {
    farm: { id: north.id, slug: 'north-farm' },
    state: 'online',
    earning: { earning: true, code: 'offered', reason: 'Offered at $0.40/GPU-h; going price for RTX 4090 24GB is $0.30/GPU-h.', fix: /Lower the price/ },
    gpus: [{ index: 0, classId: 'rtx-4090-24gb', verdict: 'healthy', reasons: [] }],
    pricePerGpuHourMicroUsd: 400_000,
    gpuProof: { verification: 'verified', reason: null, simulated: false, provenAt: null },
    drainRequested: false,
    currentJobId: null,
  });
  t.match(byId.get(unpriced.id), { earning: { earning: false, code: 'no_price' } });
  t.equal(list.json().nextCursor, null);

  const firstPage = await app.inject({ url: '/operator/api/machines?limit=1', headers: session(me) });
  const second = await app.inject({ url: `/operator/api/machines?limit=1&cursor=${firstPage.json().nextCursor}`, headers: session(me) });
  t.same([...firstPage.json().data, ...second.json().data].map((m: { id: string }) => m.id).sort(), [priced.id, unpriced.id].sort(), 'pages cover the list');

  const detail = await app.inject({ url: `/operator/api/machines/${unpriced.id}`, headers: session(me) });
  t.equal(detail.statusCode, 200, detail.body);
  t.match(detail.json(), { machine: { id: unpriced.id, earning: { code: 'no_price' } }, probe: { state: null, output: null }, recentJobs: [], history: { resolutionSeconds: 60, gpus: [], healthEvents: [] } });
  t.equal((await app.inject({ url: `/operator/api/machines/${unpriced.id}?range=7d`, headers: session(me) })).json().history.resolutionSeconds, 900, 'the history range');

  const market = await app.inject({ url: '/operator/api/market', headers: session(me) });
  t.same(market.json().data, [{
    classId: 'rtx-4090-24gb', label: 'RTX 4090 24GB', gpusOnline: 3, gpusBusy: 0, jobsQueued: 0,
    minPerGpuHourMicroUsd: 300_000, medianPerGpuHourMicroUsd: 300_000, maxPerGpuHourMicroUsd: 400_000, yourPricePerGpuHourMicroUsd: 400_000,
  }], 'the market of its classes: offered GPUs weighted, unpriced ones online but not priced');

  const classPrice = await app.inject({ method: 'PUT', url: '/operator/api/prices', headers: session(me, { csrf: true }), payload: { farm: 'north-farm', classId: 'rtx-4090-24gb', pricePerGpuHour: '0.35' } });
  t.same(classPrice.json(), { farm: 'north-farm', classId: 'rtx-4090-24gb', machines: 2, pricePerGpuHourMicroUsd: 350_000 });
  const one = await app.inject({ method: 'PUT', url: `/operator/api/machines/${unpriced.id}/price`, headers: session(me, { csrf: true }), payload: { pricePerGpuHour: null } });
  t.same(one.json(), { machineId: unpriced.id, pricePerGpuHourMicroUsd: null });
  const [prices] = await db.query<{ a: string; b: string | null }>(
    'SELECT (SELECT price_per_gpu_hour_micro_usd::text FROM machines WHERE id = $1) AS a, (SELECT price_per_gpu_hour_micro_usd::text FROM machines WHERE id = $2) AS b',
    [priced.id, unpriced.id],
  );
  t.same(prices, { a: '350000', b: null });

  const created = await app.inject({ method: 'POST', url: '/operator/api/enrollment-tokens', headers: session(me, { csrf: true }), payload: { farm: 'north-farm', regionKey: 'us-east', pricePerGpuHour: '0.45', label: 'rack 4' } });
  t.equal(created.statusCode, 201, created.body);
  const { token, enrollmentToken, command } = created.json();
  t.match(token, /^gfe_/);
  t.equal(command, `gf-agent enroll --server ${PUBLIC_URL} --token ${token}`, 'the copyable line');
  t.match(enrollmentToken, { id: /^enrt_/, farmSlug: 'north-farm', regionKey: 'us-east', pricePerGpuHourMicroUsd: 450_000, label: 'rack 4', usedAt: null, machineId: null, revokedAt: null });
  const tokens = await app.inject({ url: '/operator/api/enrollment-tokens?farm=north-farm', headers: session(me) });
  t.same(tokens.json().data.map((x: { id: string }) => x.id), [enrollmentToken.id]);

  const revoked = await app.inject({ method: 'POST', url: `/operator/api/enrollment-tokens/${enrollmentToken.id}/revoke`, headers: session(me, { csrf: true }), payload: {} });
  t.equal(revoked.statusCode, 200, revoked.body);
  t.match(revoked.json().revokedAt, /^\d{4}-/);
  t.equal(await claimEnrollmentToken(db, hashAgentToken(token)), null, 'a revoked token enrolls nothing');

  // A customer job runs on it: rented, busy; a verification canary is no rental.
  const canary = await insertJob(db, 'RUNNING');
  await db.query(`UPDATE jobs SET kind = 'verification' WHERE id = $1`, [canary]);
  await insertAssignment(db, { jobId: canary, machineId: unpriced.id, state: 'running' });
  const jobId = await insertJob(db, 'RUNNING');
  const assignmentId = await insertAssignment(db, { jobId, machineId: priced.id, state: 'running' });
  // Its GPU reserved as the matcher does: what makes a machine busy.
  t.equal(await reserveMatchedGpus(db, { machineIds: [priced.id], gpuIndexes: [0], assignmentIds: [assignmentId] }), 1);
  // Its start as the control plane timed it (phases/): running 1.5 s after the offer, the first line 1 s later.
  await recordOffers(db, [assignmentId]);
  const [{ offered_at: offeredAt }] = (await db.query<{ offered_at: Date }>('SELECT offered_at FROM assignments WHERE id = $1', [assignmentId])) as [{ offered_at: Date }];
  await recordPhases({ db }, assignmentId, ['runningAt'], new Date(offeredAt.getTime() + 1500));
  await recordPhases({ db }, assignmentId, ['firstLogAt'], new Date(offeredAt.getTime() + 2500));
  const busy = (await app.inject({ url: '/operator/api/machines', headers: session(me) })).json().data;
  t.match(busy.find((m: { id: string }) => m.id === priced.id), { state: 'busy', currentJobId: jobId, earning: { earning: true, code: 'rented', reason: `Rented: job ${jobId} is running.` } });
  t.match(busy.find((m: { id: string }) => m.id === unpriced.id), { state: 'online', currentJobId: null, earning: { code: 'no_price' } });
  const pricedDetail = (await app.inject({ url: `/operator/api/machines/${priced.id}`, headers: session(me) })).json();
  t.match(pricedDetail.recentJobs, [{ jobId, status: 'RUNNING', finishedAt: null, failureCode: null }]);
  t.same(pricedDetail.startTimes, { sinceDays: 30, maxRuns: 100, toRunningMs: { runs: 1, p50: 1500, p95: 1500 }, toFirstLogMs: { runs: 1, p50: 2500, p95: 2500 } }, 'how fast it starts jobs, from the offer');
  await db.query(`UPDATE assignments SET state = 'finished', finished_at = now() WHERE job_id = $1`, [jobId]);
  await releaseAssignmentGpus(db, assignmentId);

  const drained = await app.inject({ method: 'POST', url: `/operator/api/machines/${priced.id}/drain`, headers: session(me, { csrf: true }), payload: { reason: 'new fans' } });
  t.equal(drained.statusCode, 200, drained.body);
  t.match(drained.json(), { id: priced.id, state: 'drained', drainRequested: true, earning: { earning: false, code: 'draining', fix: /gf-agent undrain/ } });
  const lastJob = await insertJob(db, 'RUNNING');
  const lastAssignment = await insertAssignment(db, { jobId: lastJob, machineId: priced.id, state: 'running' });
  await reserveMatchedGpus(db, { machineIds: [priced.id], gpuIndexes: [0], assignmentIds: [lastAssignment] });
  const listed = (await app.inject({ url: '/operator/api/machines', headers: session(me) })).json().data;
  t.match(listed.find((m: { id: string }) => m.id === priced.id), { state: 'draining', currentJobId: lastJob }, 'draining while a job still runs on it');
  await db.query(`UPDATE assignments SET state = 'finished', finished_at = now() WHERE job_id = $1`, [lastJob]);
  await releaseAssignmentGpus(db, lastAssignment);
  const undrained = await app.inject({ method: 'POST', url: `/operator/api/machines/${priced.id}/undrain`, headers: session(me, { csrf: true }), payload: {} });
  t.match(undrained.json(), { state: 'online', drainRequested: false, earning: { code: 'offered' } });

  const audit = await db.query<{ actor_kind: string; actor_id: string; action: string; target_id: string }>('SELECT actor_kind, actor_id, action, target_id FROM audit_log ORDER BY id');
  t.same(audit.map((a) => [a.actor_kind, a.actor_id, a.action]), [
    'price.set_class', 'price.set_machine', 'enrollment_token.create', 'enrollment_token.revoke', 'machine.drain', 'machine.undrain',
  ].map((action) => ['operator_wallet', payout.address.toLowerCase(), action]), 'every write is in the audit log with the wallet');
  t.same(audit.slice(-3).map((a) => a.target_id), [enrollmentToken.id, priced.id, priced.id]);
  t.ok(checkedAnswers() >= 8, `${checkedAnswers()} answers parsed by the fleet contract (shared/src/fleet/api.ts)`);
});

t.test('behavior: per-GPU health (the GPU-health columns of machine_gpus) reaches the row and the verdict', async (t) => {
  const { app, db, priced } = await twoFarms(t);
  await db.query(`UPDATE machine_gpus SET health = 'failed', health_reasons = '["XID 79: the GPU fell off the bus"]'::jsonb WHERE machine_id = $1`, [priced.id]);
  const me = await signIn(app, payout);
  const row = (await app.inject({ url: `/operator/api/machines/${priced.id}`, headers: session(me) })).json().machine;
  t.same(row.gpus, [{ index: 0, classId: 'rtx-4090-24gb', label: 'RTX 4090 24GB', verdict: 'failed', reasons: ['XID 79: the GPU fell off the bus'] }]);
  t.match(row.earning, { earning: false, code: 'gpu_failed', reason: 'Every GPU failed its health checks (GPU 0: XID 79: the GPU fell off the bus).' });
});

t.test('behavior: the GPU challenge reaches the row: proving, failed with its reason and when it is tried again, then proven with its date', async (t) => {
  const { app, db, priced } = await twoFarms(t);
  const me = await signIn(app, payout);
  const row = async () => (await app.inject({ url: `/operator/api/machines/${priced.id}`, headers: session(me) })).json().machine;

  await createChallenge(db, { machineId: priced.id, state: 'running' });
  t.match(await row(), {
    gpuProof: { verification: 'verifying', reason: null, provenAt: null },
    earning: { earning: false, code: 'tier_unverified', reason: 'Proving its GPUs: a GPU challenge is running on it.', fix: /^Keep the agent running/ },
  });

  const failed = await createChallenge(db, { machineId: priced.id, state: 'failed', cause: 'retry', reason: 'the machine sent no commitment in time' });
  const failedRow = await row();
  t.match(failedRow.gpuProof, { verification: 'failed', reason: `GPU challenge ${failed.id} failed: the machine sent no commitment in time`, provenAt: null });
  t.same(failedRow.earning, {
    earning: false,
    code: 'tier_unverified',
    reason: `GPUs not proven: GPU challenge ${failed.id} failed: the machine sent no commitment in time.`,
    fix: 'Fix what the reason says, then run `gf-agent doctor` on the machine; the challenge is tried again in 10 minutes or when the agent restarts.',
    since: null,
  });

  await createChallenge(db, { machineId: priced.id, state: 'passed', cause: 'retry' });
  const proven = await row();
  t.match(proven, { gpuProof: { verification: 'verified', reason: null, simulated: false, provenAt: /^\d{4}-/ }, earning: { earning: true, code: 'offered' } });
  t.ok(Math.abs(Date.parse(proven.gpuProof.provenAt) - Date.now()) < 60_000, 'proven just now');
  const listed = (await app.inject({ url: '/operator/api/machines', headers: session(me) })).json().data.find((m: { id: string }) => m.id === priced.id);
  t.same(listed.gpuProof, proven.gpuProof, 'the list carries the same proof');
});

t.test('error: bad input names the field', async (t) => {
  const { app, unpriced } = await twoFarms(t);
  const me = await signIn(app, payout);
  const write = { headers: session(me, { csrf: true }) };
  const badPrice = await app.inject({ method: 'PUT', url: `/operator/api/machines/${unpriced.id}/price`, ...write, payload: { pricePerGpuHour: 'cheap' } });
  assertError(t, badPrice, 'invalid_request', 400);
  t.match(badPrice.json().error.message, /pricePerGpuHour/);
  const badClass = await app.inject({ method: 'PUT', url: '/operator/api/prices', ...write, payload: { farm: 'north-farm', classId: 'gtx-1080', pricePerGpuHour: '1' } });
  assertError(t, badClass, 'invalid_request', 400);
  t.match(badClass.json().error.message, /classId/);
  const badRegion = await app.inject({ method: 'POST', url: '/operator/api/enrollment-tokens', ...write, payload: { farm: 'north-farm', regionKey: 'moon', pricePerGpuHour: null } });
  assertError(t, badRegion, 'invalid_request', 400);
  t.match(badRegion.json().error.message, /regionKey/);
  const badQuery = await app.inject({ url: '/operator/api/earnings?groupBy=week', headers: session(me) });
  assertError(t, badQuery, 'invalid_request', 400);
  t.match(badQuery.json().error.message, /groupBy/);
  assertError(t, await app.inject({ url: '/operator/api/machines/not-an-id', headers: session(me) }), 'invalid_request', 400);
  assertError(t, await app.inject({ method: 'PUT', url: '/operator/api/prices', headers: session(me), payload: { farm: 'north-farm', classId: 'rtx-4090-24gb', pricePerGpuHour: '1' } }), 'forbidden', 403);
});

t.test("error: an operator cannot see or change another farm's machines, tokens, prices or earnings (404, never 403)", async (t) => {
  const { app, db, north, priced } = await twoFarms(t);
  const owner = await signIn(app, payout);
  const token = (await app.inject({ method: 'POST', url: '/operator/api/enrollment-tokens', headers: session(owner, { csrf: true }), payload: { farm: 'north-farm', regionKey: 'us-east', pricePerGpuHour: null } })).json().enrollmentToken;

  const them = await signIn(app, rival);
  const read = { headers: session(them) };
  const write = { headers: session(them, { csrf: true }) };
  t.same((await app.inject({ url: '/operator/api/machines', ...read })).json().data.map((m: { farm: { slug: string } }) => m.farm.slug), ['rival-farm'], 'its own list only');
  for (const url of [`/operator/api/machines/${priced.id}`, '/operator/api/machines?farm=north-farm', '/operator/api/market?farm=north-farm', '/operator/api/enrollment-tokens?farm=north-farm', '/operator/api/earnings?farm=north-farm', '/operator/api/earnings.csv?farm=north-farm', `/operator/api/farms/${north.id}/operators`]) {
    assertError(t, await app.inject({ url, ...read }), 'not_found', 404);
  }
  t.same((await app.inject({ url: '/operator/api/enrollment-tokens', ...read })).json().data, [], "no token of another farm's");
  const writes = [
    { method: 'PUT' as const, url: `/operator/api/machines/${priced.id}/price`, payload: { pricePerGpuHour: '0.01' } },
    { method: 'PUT' as const, url: '/operator/api/prices', payload: { farm: 'north-farm', classId: 'rtx-4090-24gb', pricePerGpuHour: '0.01' } },
    { method: 'POST' as const, url: `/operator/api/enrollment-tokens/${token.id}/revoke`, payload: {} },
    { method: 'POST' as const, url: `/operator/api/machines/${priced.id}/drain`, payload: {} },
    { method: 'POST' as const, url: '/operator/api/enrollment-tokens', payload: { farm: 'north-farm', regionKey: 'us-east', pricePerGpuHour: null } },
    { method: 'POST' as const, url: `/operator/api/farms/${north.id}/operators`, payload: { wallet: rival.address } },
    { method: 'DELETE' as const, url: `/operator/api/farms/${north.id}/operators/${staff.address}` },
  ];
  for (const w of writes) assertError(t, await app.inject({ ...w, ...write }), 'not_found', 404);
  const [after] = await db.query<{ price: string; drained: boolean; revoked: boolean; operators: number }>(
    `SELECT (SELECT price_per_gpu_hour_micro_usd::text FROM machines WHERE id = $1) AS price,
            (SELECT drain_requested FROM machines WHERE id = $1) AS drained,
            (SELECT revoked_at IS NOT NULL FROM enrollment_tokens WHERE id = $2) AS revoked,
            (SELECT count(*)::int FROM farm_operators WHERE farm_id = $3) AS operators`,
    [priced.id, token.id, north.id],
  );
  t.same(after, { price: '400000', drained: false, revoked: false, operators: 1 }, 'nothing of the other farm changed');
});

t.test('behavior: a customer session gets 403; a listed operator does everything but add or remove operators', async (t) => {
  const { app, north, unpriced } = await twoFarms(t);
  const someone = await signIn(app, customer);
  for (const url of ['/operator/api/machines', '/operator/api/earnings', '/operator/api/market']) assertError(t, await app.inject({ url, headers: session(someone) }), 'forbidden', 403);
  assertError(t, await app.inject({ url: '/operator/api/machines', headers: { host: HOST } }), 'missing_api_key', 401);

  const crew = await signIn(app, staff);
  const write = { headers: session(crew, { csrf: true }) };
  t.equal((await app.inject({ url: `/operator/api/machines/${unpriced.id}`, headers: session(crew) })).statusCode, 200, 'sees the machines');
  t.equal((await app.inject({ method: 'PUT', url: `/operator/api/machines/${unpriced.id}/price`, ...write, payload: { pricePerGpuHour: '0.5' } })).statusCode, 200, 'prices them');
  t.equal((await app.inject({ method: 'POST', url: '/operator/api/enrollment-tokens', ...write, payload: { farm: 'north-farm', regionKey: 'us-east', pricePerGpuHour: '0.5' } })).statusCode, 201, 'makes tokens');
  t.equal((await app.inject({ url: '/operator/api/earnings', headers: session(crew) })).statusCode, 200, 'reads the earnings');
  const add = await app.inject({ method: 'POST', url: `/operator/api/farms/${north.id}/operators`, ...write, payload: { wallet: customer.address } });
  assertError(t, add, 'forbidden', 403);
  t.match(add.json().error.message, /payout wallet/);
  assertError(t, await app.inject({ method: 'DELETE', url: `/operator/api/farms/${north.id}/operators/${staff.address}`, ...write }), 'forbidden', 403);

  const owner = await signIn(app, payout);
  const ownerWrite = { headers: session(owner, { csrf: true }) };
  const added = await app.inject({ method: 'POST', url: `/operator/api/farms/${north.id}/operators`, ...ownerWrite, payload: { wallet: customer.address } });
  t.equal(added.statusCode, 201, added.body);
  t.same((await app.inject({ url: `/operator/api/farms/${north.id}/operators`, headers: session(owner) })).json().data.map((o: { wallet: string }) => o.wallet).sort(), [staff.address, customer.address].map((a) => a.toLowerCase()).sort());
  t.equal((await app.inject({ url: '/operator/api/machines', headers: session(someone) })).statusCode, 200, 'the added wallet runs the farm now');
  const removed = await app.inject({ method: 'DELETE', url: `/operator/api/farms/${north.id}/operators/${customer.address}`, ...ownerWrite });
  t.equal(removed.statusCode, 204, removed.body);
  assertError(t, await app.inject({ url: '/operator/api/machines', headers: session(someone) }), 'forbidden', 403);
});

t.test('behavior: the most requested images of the market, merged by name, with the machines that hold them', async (t) => {
  const { app, db, priced, rivals, checkedAnswers } = await twoFarms(t);
  const me = await signIn(app, payout);
  const owner = await createJobOwner(db);
  const pinned = `ghcr.io/acme/train@sha256:${'d'.repeat(64)}`;
  const ids = await createQueuedJobs(db, owner, [
    { spec: { image: 'ubuntu' } },
    { spec: { image: 'docker.io/library/ubuntu:latest' } },
    { spec: { image: 'ubuntu:latest' }, status: 'MATCHING' },
    { spec: { image: pinned } },
    { spec: { image: 'ghcr.io/acme/train', imageDigest: `sha256:${'d'.repeat(64)}` } },
    { spec: { image: 'never-funded:1' }, status: 'CREATED' },
    { spec: { image: 'long-ago:1' } },
  ]);
  await db.query(`UPDATE jobs SET created_at = now() - interval '10 days' WHERE id = $1`, [ids[6]!]);
  const report = (names: string[]): ImageCacheReport => ({
    budgetBytes: 1_000,
    usedBytes: 10,
    images: [{ id: `sha256:${'e'.repeat(64)}`, repoDigests: names.filter((n) => n.includes('@')), repoTags: names.filter((n) => !n.includes('@')), layers: [0], lastUsedAt: new Date().toISOString() }],
    layers: [{ digest: `sha256:${'a'.repeat(64)}`, sizeBytes: 10 }],
    omitted: 0,
  });
  await writeImageReport(db, priced.id, report(['ubuntu:latest']));
  await writeImageReport(db, rivals.id, report(['ubuntu:latest', pinned]));

  const res = await app.inject({ url: '/operator/api/requested-images', headers: session(me) });
  t.equal(res.statusCode, 200, res.body);
  t.same(res.json().days, 7);
  t.same(
    res.json().data.map((r: { image: string; jobs: number; machinesHolding: number; yourMachinesHolding: number }) => [r.image, r.jobs, r.machinesHolding, r.yourMachinesHolding]),
    [
      ['ubuntu:latest', 3, 2, 1],
      [pinned, 2, 1, 0],
    ],
    'funded jobs of the last 7 days, by name; held on the market and on its farms',
  );
  t.match(res.json().data[0].lastRequestedAt, /^\d{4}-\d\d-\d\dT/);
  const older = await app.inject({ url: '/operator/api/requested-images?days=30&limit=1', headers: session(me) });
  t.same(older.json().data.map((r: { image: string }) => r.image), ['ubuntu:latest'], 'limit');
  const month = await app.inject({ url: '/operator/api/requested-images?days=30', headers: session(me) });
  t.ok(month.json().data.some((r: { image: string }) => r.image === 'long-ago:1'), 'a longer window reaches older jobs');
  assertError(t, await app.inject({ url: '/operator/api/requested-images?days=31', headers: session(me) }), 'invalid_request', 400);
  t.ok(checkedAnswers() >= 3, 'answers checked against the fleet contract');
});
