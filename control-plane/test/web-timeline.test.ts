import { gpuFarmEscrowAbi, JOB_SUMMARIES_MAX, jobSummaryListSchema, jobTimelineSchema, serviceIndexSchema, type JobTimeline } from '@gpufarm/shared';
import t, { type Test } from 'tap';
import { getAddress, type Hex } from 'viem';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { newId } from '../src/ids.js';
import { scanEscrowEvents } from '../src/jobs/escrow-worker.js';
import { recordCompletion } from '../src/jobs/settlement.js';
import { applyTransition } from '../src/jobs/store.js';
import { assertError } from './helpers/assert.js';
import { buildEscrowTestApp, sendFundingCalls, startTestChain } from './helpers/chain.js';
import { createPostgresTestDatabase } from './helpers/database.js';
import { devWallet, fakeWebDist, PUBLIC_URL, session, signIn, type SignedIn } from './helpers/web.js';

/**
 * The dashboard's job timeline on PostgreSQL and a real anvil: a job created and funded through the
 * dashboard, put on a machine as the matcher writes it, completed on the escrow, then approved
 * or disputed by the customer's wallet and read back by the event scan.
 */

const chainP = startTestChain(t, { challengeWindowSeconds: 600 });
const PROVIDER = '0x000000000000000000000000000000000000beef' as const;
const TX = /^0x[0-9a-f]{64}$/;

async function setup(t: Test) {
  const c = await chainP;
  const { db } = await createPostgresTestDatabase(t);
  const test = await buildEscrowTestApp(t, c, { db, env: { GF_PUBLIC_URL: PUBLIC_URL, GF_WEB_DIR: fakeWebDist(t) } });
  const farm = await createFarm(db);
  const machine = await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 });
  await test.offerIndex.refresh();
  // Dev account 3 holds tUSDC on the test chain: it signs in and funds.
  const customer = await signIn(test.app, devWallet(3));
  const timeline = async (jobId: string, as: SignedIn = customer): Promise<JobTimeline> => {
    const res = await test.app.inject({ url: `/dashboard/api/jobs/${jobId}/timeline`, headers: session(as) });
    if (res.statusCode !== 200) throw new Error(`timeline answered ${res.statusCode}: ${res.body}`);
    return jobTimelineSchema.parse(res.json());
  };
  /** Creates a job from the dashboard, funds it from the wallet and confirms; returns its id, key and funding hash. */
  const fundedJob = async (title: string) => {
    const created = await test.app.inject({ method: 'POST', url: '/dashboard/api/v1/jobs', headers: session(customer, { csrf: true }), payload: { title, image: 'ghcr.io/acme/x:1', gpu: { count: 1 }, maxRuntimeSeconds: 3600, paymentToken: 'stable' } });
    t.equal(created.statusCode, 201, 'created');
    const job = created.json().job as { id: string; payment: { escrowJobKey: Hex } };
    const funding = await test.app.inject({ url: `/dashboard/api/v1/jobs/${job.id}/funding`, headers: session(customer) });
    const fundTx = (await sendFundingCalls(c, c.wallet(3), funding.json().calls)).at(-1)!;
    const confirmed = await test.app.inject({ method: 'POST', url: `/dashboard/api/v1/jobs/${job.id}/fund-confirm`, headers: session(customer, { csrf: true }), payload: { txHash: fundTx } });
    t.equal(confirmed.statusCode, 200, 'funded');
    return { jobId: job.id, jobKey: job.payment.escrowJobKey, fundTx: fundTx.toLowerCase() };
  };
  /** QUEUED -> MATCHING -> RUNNING on the machine (the assignment as the matcher writes it), then completed on the escrow -> COMPLETED. */
  const runAndComplete = async (jobId: string) => {
    const assignmentId = newId('asg');
    await db.query(
      `INSERT INTO assignments (id, job_id, machine_id, attempt, gpu_indices, class_id, gpu_model, price_per_gpu_hour_micro_usd, spec)
       VALUES ($1, $2, $3, 1, '{0}', 'rtx-4090-24gb', 'NVIDIA GeForce RTX 4090', 400000, '{}'::jsonb)`,
      [assignmentId, jobId, machine.id],
    );
    t.ok(await applyTransition(db, { jobId, from: 'QUEUED', to: 'MATCHING', set: { assignment_id: assignmentId } }), 'matched');
    await db.query(`UPDATE assignments SET state = 'running', accepted_at = now(), started_at = now() WHERE id = $1`, [assignmentId]);
    t.ok(await applyTransition(db, { jobId, from: 'MATCHING', to: 'RUNNING', assignmentId }), 'running');
    await recordCompletion(test, { jobId, runtimeSeconds: 60, pricePerGpuHourMicroUsd: 400_000, resultHash: `0x${'ab'.repeat(32)}`, provider: PROVIDER });
    await db.query(`UPDATE assignments SET state = 'finished', finished_at = now() WHERE id = $1`, [assignmentId]);
    t.ok(await applyTransition(db, { jobId, from: 'RUNNING', to: 'COMPLETED', assignmentId }), 'completed');
  };
  return { c, ...test, customer, timeline, fundedJob, runAndComplete };
}

const states = (timeline: JobTimeline) => timeline.events.map((e) => e.state);
const eventOf = (timeline: JobTimeline, state: string) => timeline.events.find((e) => e.state === state);

t.test('default: a job through its states, approved early: each state with its time, the escrow ones with their transaction', async (t) => {
  const { c, db, escrow, timeline, fundedJob, runAndComplete } = await setup(t);
  const { jobId, jobKey, fundTx } = await fundedJob('render frames');

  const queued = await timeline(jobId);
  t.match(queued, { object: 'job_timeline', jobId, title: 'render frames' });
  // The spec as accepted: what was sent, with the server's defaults written in.
  t.match(queued.spec, { title: 'render frames', image: 'ghcr.io/acme/x:1', gpu: { count: 1 }, maxRuntimeSeconds: 3600, paymentToken: 'stable', workloadType: 'custom', networkPolicy: { mode: 'none' }, outputRules: [{ path: '/output' }] });
  t.same(states(queued), ['created', 'funded', 'queued']);
  t.equal(eventOf(queued, 'created')!.at, queued.createdAt);
  t.equal(eventOf(queued, 'funded')!.txHash, fundTx, 'the funding transaction');
  t.ok(eventOf(queued, 'queued')!.at);

  await runAndComplete(jobId);
  const completed = await timeline(jobId);
  t.same(states(completed), ['created', 'funded', 'queued', 'assigned', 'running', 'completion_recorded', 'completed', 'challenge_window_ends']);
  t.match(eventOf(completed, 'completion_recorded')!.txHash, TX);
  t.ok(Date.parse(eventOf(completed, 'challenge_window_ends')!.at!) > Date.now(), 'the window ends ahead');
  for (const event of completed.events) t.ok(event.at, `${event.state} has its time`);

  const approve = await c.wallet(3).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'approve', args: [jobKey] });
  await c.publicClient.waitForTransactionReceipt({ hash: approve });
  await scanEscrowEvents({ db, escrow, startBlock: 0 });
  const approved = await timeline(jobId);
  t.same(states(approved), ['created', 'funded', 'queued', 'assigned', 'running', 'completion_recorded', 'completed', 'approved']);
  t.match(eventOf(approved, 'approved'), { txHash: approve.toLowerCase(), at: String });
});

t.test('behavior: a disputed job shows the dispute transaction', async (t) => {
  const { c, db, escrow, timeline, fundedJob, runAndComplete } = await setup(t);
  const { jobId, jobKey } = await fundedJob('disputed');
  await runAndComplete(jobId);
  const dispute = await c.wallet(3).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'dispute', args: [jobKey] });
  await c.publicClient.waitForTransactionReceipt({ hash: dispute });
  await scanEscrowEvents({ db, escrow, startBlock: 0 });
  const disputed = await timeline(jobId);
  t.match(eventOf(disputed, 'disputed'), { txHash: dispute.toLowerCase(), at: String });
  t.notOk(eventOf(disputed, 'approved') ?? eventOf(disputed, 'released'), 'not released');
});

t.test('behavior: a canceled job ends with its time; its funding refund is authorized on chain', async (t) => {
  const { app, customer, timeline, fundedJob } = await setup(t);
  const { jobId } = await fundedJob('canceled');
  const canceled = await app.inject({ method: 'POST', url: `/dashboard/api/v1/jobs/${jobId}/cancel`, headers: session(customer, { csrf: true }), payload: {} });
  t.equal(canceled.statusCode, 200, canceled.body);
  const after = await timeline(jobId);
  t.same(states(after), ['created', 'funded', 'queued', 'canceled', 'refund_authorized']);
  t.ok(eventOf(after, 'canceled')!.at);
  t.match(eventOf(after, 'refund_authorized'), { txHash: TX, at: String });
});

t.test('error: another account’s job is not_found, a malformed id invalid_request, no session missing_api_key', async (t) => {
  const { app, timeline, fundedJob } = await setup(t);
  const { jobId } = await fundedJob('mine');
  const other = await signIn(app, devWallet(2));
  const res = await app.inject({ url: `/dashboard/api/jobs/${jobId}/timeline`, headers: session(other) });
  assertError(t, res, 'not_found', 404);
  t.equal(res.json().error.message, `No job ${jobId} on this account.`, 'told as no job at all');
  assertError(t, await app.inject({ url: '/dashboard/api/jobs/nope/timeline', headers: session(other) }), 'invalid_request', 400);
  assertError(t, await app.inject({ url: `/dashboard/api/jobs/${jobId}/timeline` }), 'missing_api_key', 401);
  t.equal((await timeline(jobId)).jobId, jobId, 'the owner still sees it');
});

t.test('default: the Jobs list’s summaries: title, image and creation time of the account’s jobs named, another account’s left out; a bad list is refused naming ids', async (t) => {
  const { app, customer, fundedJob } = await setup(t);
  const { jobId: first } = await fundedJob('first');
  const { jobId: second } = await fundedJob('second');
  const other = await signIn(app, devWallet(2));
  const summaries = async (ids: string, as: SignedIn = customer) => app.inject({ url: `/dashboard/api/jobs/summaries?ids=${ids}`, headers: session(as) });
  const answer = jobSummaryListSchema.parse((await summaries(`${first},${second}`)).json());
  t.same(
    answer.data.map((s) => [s.jobId, s.title, s.image]).sort(),
    [[first, 'first', 'ghcr.io/acme/x:1'], [second, 'second', 'ghcr.io/acme/x:1']].sort(),
  );
  t.ok(answer.data.every((s) => Date.parse(s.createdAt) <= Date.now()), 'with their creation times');
  t.same(jobSummaryListSchema.parse((await summaries(first, other)).json()).data, [], "another account's job is not told");
  const bad = await summaries(`${first},nope`);
  assertError(t, bad, 'invalid_request', 400);
  t.match(bad.json().error.details, [{ field: /^ids/ }]);
  assertError(t, await summaries(Array.from({ length: JOB_SUMMARIES_MAX + 1 }, () => first).join(',')), 'invalid_request', 400);
  assertError(t, await app.inject({ url: `/dashboard/api/jobs/summaries?ids=${first}` }), 'missing_api_key', 401);
});

t.test('default: the service index names the escrow the dashboard sends approve, dispute and claimRefund to', async (t) => {
  const { c, app } = await setup(t);
  const index = serviceIndexSchema.parse((await app.inject({ url: '/v1' })).json());
  t.equal(index.escrow?.address, getAddress(c.deployment.escrow), 'checksummed, as wallets show it');
});
