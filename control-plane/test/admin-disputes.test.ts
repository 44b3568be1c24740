import { ADMIN_JOB_LOG_LINES, gpuFarmEscrowAbi } from '@gpufarm/shared';
import t, { type Test } from 'tap';
import { erc20Abi, type Address, type Hex } from 'viem';
import { newArtifactId } from '../src/artifacts/metadata.js';
import { insertArtifact } from '../src/artifacts/store.js';
import { readEscrowJob } from '../src/chain/escrow.js';
import { appendServiceLine } from '../src/logs/store.js';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { newId } from '../src/ids.js';
import { scanEscrowEvents } from '../src/jobs/escrow-worker.js';
import { recordCompletion } from '../src/jobs/settlement.js';
import { applyTransition } from '../src/jobs/store.js';
import { assertError } from './helpers/assert.js';
import { buildEscrowTestApp, sendFundingCalls, startTestChain, TREASURY } from './helpers/chain.js';
import { createPostgresTestDatabase } from './helpers/database.js';
import { contractChecked } from './helpers/fleet-contract.js';
import { devWallet, fakeWebDist, PUBLIC_URL, session, signIn, type SignedIn } from './helpers/web.js';

/**
 * An admin resolves a dispute on a real anvil: a job funded from the dashboard, run, completed
 * on the escrow, disputed by the customer's wallet; the admin's release or refund goes through
 * the escrow's `resolveDispute` and the balances and the escrow's status are read back.
 */

const chainP = startTestChain(t, { challengeWindowSeconds: 600 });
const PROVIDER = '0x000000000000000000000000000000000000beef' as const;
const admin = devWallet(1);

async function setup(t: Test) {
  const c = await chainP;
  const { db } = await createPostgresTestDatabase(t);
  const built = await buildEscrowTestApp(t, c, { db, env: { GF_PUBLIC_URL: PUBLIC_URL, GF_WEB_DIR: fakeWebDist(t), GF_ADMIN_WALLETS: admin.address } });
  const { app, checked } = contractChecked(built.app);
  const test = { ...built, app };
  const farm = await createFarm(db);
  const machine = await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 });
  await test.offerIndex.refresh();
  const customer = await signIn(test.app, devWallet(3));
  const asAdmin = await signIn(test.app, admin);
  const token = c.deployment.stablecoin!.address as Address;
  const balance = (who: Address) => c.publicClient.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [who] });
  /** A job funded from the dashboard, run on the machine, completed on the escrow and disputed by the customer. */
  const disputeReason = (jobId: string, body: unknown, as: SignedIn = customer) =>
    test.app.inject({ method: 'POST', url: `/dashboard/api/jobs/${jobId}/dispute-reason`, headers: session(as, { csrf: true }), payload: body as object });
  const disputedJob = async (title: string, words?: { reason: string; evidence?: string }) => {
    const created = await test.app.inject({ method: 'POST', url: '/dashboard/api/v1/jobs', headers: session(customer, { csrf: true }), payload: { title, image: 'ghcr.io/acme/x:1', gpu: { count: 1 }, maxRuntimeSeconds: 3600, paymentToken: 'stable' } });
    t.equal(created.statusCode, 201, created.body);
    const job = created.json().job as { id: string; payment: { escrowJobKey: Hex } };
    const funding = await test.app.inject({ url: `/dashboard/api/v1/jobs/${job.id}/funding`, headers: session(customer) });
    const fundTx = (await sendFundingCalls(c, c.wallet(3), funding.json().calls)).at(-1)!;
    t.equal((await test.app.inject({ method: 'POST', url: `/dashboard/api/v1/jobs/${job.id}/fund-confirm`, headers: session(customer, { csrf: true }), payload: { txHash: fundTx } })).statusCode, 200);
    const assignmentId = newId('asg');
    await db.query(
      `INSERT INTO assignments (id, job_id, machine_id, attempt, gpu_indices, class_id, gpu_model, price_per_gpu_hour_micro_usd, spec)
       VALUES ($1, $2, $3, 1, '{0}', 'rtx-4090-24gb', 'NVIDIA GeForce RTX 4090', 400000, '{}'::jsonb)`,
      [assignmentId, job.id, machine.id],
    );
    await applyTransition(db, { jobId: job.id, from: 'QUEUED', to: 'MATCHING', set: { assignment_id: assignmentId } });
    await db.query(`UPDATE assignments SET state = 'running', accepted_at = now(), started_at = now() WHERE id = $1`, [assignmentId]);
    await applyTransition(db, { jobId: job.id, from: 'MATCHING', to: 'RUNNING', assignmentId });
    assertError(t, await disputeReason(job.id, { reason: 'too early' }), 'conflict', 409);
    await recordCompletion(test, { jobId: job.id, runtimeSeconds: 600, pricePerGpuHourMicroUsd: 400_000, resultHash: `0x${'ab'.repeat(32)}`, provider: PROVIDER });
    await db.query(`UPDATE assignments SET state = 'finished', finished_at = now() WHERE id = $1`, [assignmentId]);
    await applyTransition(db, { jobId: job.id, from: 'RUNNING', to: 'COMPLETED', assignmentId });
    if (words) {
      const stored = await disputeReason(job.id, words);
      t.equal(stored.statusCode, 200, stored.body);
      t.match(stored.json(), { jobId: job.id, reason: words.reason, evidence: words.evidence ?? null, recordedAt: /^\d{4}-/ });
    }
    const dispute = await c.wallet(3).writeContract({ address: c.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'dispute', args: [job.payment.escrowJobKey] });
    await c.publicClient.waitForTransactionReceipt({ hash: dispute });
    await scanEscrowEvents({ db, escrow: test.escrow, startBlock: 0 });
    return { jobId: job.id, jobKey: job.payment.escrowJobKey };
  };
  const resolve = (as: SignedIn, jobId: string, outcome: string) =>
    test.app.inject({ method: 'POST', url: `/admin/api/jobs/${jobId}/resolve-dispute`, headers: { ...session(as, { csrf: true }), 'content-type': 'application/json' }, payload: JSON.stringify({ outcome }) });
  return { c, ...test, customer, asAdmin, balance, disputedJob, disputeReason, resolve, checkedAnswers: checked };
}

t.test('behavior: release pays the recorded payout and fee; the escrow and the job record it', async (t) => {
  const { c, db, app, escrow, asAdmin, balance, disputedJob, disputeReason, resolve, checkedAnswers } = await setup(t);
  const { jobId, jobKey } = await disputedJob('released dispute', { reason: 'the output is empty', evidence: 'result.txt is 0 bytes; expected 4 KiB' });
  assertError(t, await disputeReason(jobId, { reason: '   ' }), 'invalid_request', 400);
  t.match((await disputeReason(jobId, { reason: '' })).json().error.details, [{ field: 'reason' }], 'an empty reason is refused, naming the field');
  assertError(t, await disputeReason(jobId, { reason: 'not mine' }, asAdmin), 'not_found', 404);
  const listed = (await app.inject({ url: '/admin/api/disputes', headers: session(asAdmin) })).json();
  const before = await readEscrowJob(escrow.chain, jobKey);
  t.same(listed.data, [{
    jobId, jobKey, customer: devWallet(3).address.toLowerCase(), provider: PROVIDER, token: c.deployment.stablecoin!.address.toLowerCase(), symbol: 'tUSDC', decimals: 6,
    amount: before.amount.toString(), payout: before.payout.toString(), fee: before.fee.toString(), disputedAt: listed.data[0].disputedAt,
    disputeEndsAt: new Date(Number(before.disputeEndsAt) * 1000).toISOString(),
    reason: 'the output is empty', evidence: 'result.txt is 0 bytes; expected 4 KiB',
  }]);
  t.match(listed.data[0].disputedAt, /^\d{4}-/);
  t.equal(before.status, 'disputed');
  const [provider0, treasury0, customer0] = await Promise.all([balance(PROVIDER), balance(TREASURY), balance(devWallet(3).address)]);

  // What the admin reads before deciding: the job, its timeline, the words, the machine, the log, the outputs.
  const accountId = (await db.query<{ account_id: string }>('SELECT account_id FROM jobs WHERE id = $1', [jobId]))[0]!.account_id;
  for (let i = 1; i <= ADMIN_JOB_LOG_LINES + 5; i++) await appendServiceLine(db, jobId, `line ${i}`, { force: true });
  const output = await insertArtifact(db, { id: newArtifactId(), accountId, jobId, assignmentId: null, kind: 'output', name: null, filename: 'output.tar', sizeBytes: 10, sha256: 'ab'.repeat(32), declaredSha256: null, ttlDays: 7 });
  const view = await app.inject({ url: `/admin/api/jobs/${jobId}`, headers: session(asAdmin) });
  t.equal(view.statusCode, 200, view.body);
  const v = view.json();
  t.match(v, { job: { id: jobId, status: 'COMPLETED', receipt: { status: 'disputed' } }, customer: { accountId, wallet: devWallet(3).address.toLowerCase() }, machineId: /^mach_/, dispute: { reason: 'the output is empty', evidence: 'result.txt is 0 bytes; expected 4 KiB', disputedAt: String, disputeEndsAt: String } });
  t.ok(v.timeline.events.some((e: { state: string }) => e.state === 'disputed'), 'the timeline shows the dispute');
  t.equal(v.log.lines.length, ADMIN_JOB_LOG_LINES, 'the last lines');
  t.ok(v.log.total >= ADMIN_JOB_LOG_LINES + 5, 'and how many there are');
  t.equal(v.log.lines.at(-1).line, `line ${ADMIN_JOB_LOG_LINES + 5}`, 'the newest last');
  t.match(v.job.artifacts, [{ id: output.id, kind: 'output' }]);
  const download = await app.inject({ url: `/admin/api/artifacts/${output.id}`, headers: session(asAdmin) });
  t.equal(download.statusCode, 302, download.body);
  t.match(download.headers.location, /\/files\//, 'a signed URL of the bytes');
  t.match((await app.inject({ url: '/admin/api/audit?limit=1', headers: session(asAdmin) })).json().data[0], { action: 'job.read_artifact', targetId: jobId, details: { artifactId: output.id } }, 'the read is audited');
  assertError(t, await app.inject({ url: `/admin/api/jobs/${jobId}`, headers: session(await signIn(app, devWallet(3))) }), 'forbidden', 403);
  assertError(t, await app.inject({ url: '/admin/api/jobs/nope', headers: session(asAdmin) }), 'invalid_request', 400);
  assertError(t, await app.inject({ url: `/admin/api/jobs/job_${'0'.repeat(26)}`, headers: session(asAdmin) }), 'not_found', 404);
  assertError(t, await app.inject({ url: `/admin/api/artifacts/art_${'0'.repeat(26)}`, headers: session(asAdmin) }), 'not_found', 404);

  const res = await resolve(asAdmin, jobId, 'release');
  t.equal(res.statusCode, 200, res.body);
  t.match(res.json(), { jobId, outcome: 'release', txHash: /^0x[0-9a-f]{64}$/ });
  const after = await readEscrowJob(escrow.chain, jobKey);
  t.equal(after.status, 'released');
  t.equal((await balance(PROVIDER)) - provider0, before.payout - before.fee, 'the provider gets the payout less the fee');
  t.equal((await balance(TREASURY)) - treasury0, before.fee, 'the treasury gets the fee');
  t.equal((await balance(devWallet(3).address)) - customer0, before.amount - before.payout, 'the customer gets the rest of the deposit');
  const [job] = await db.query<{ settlement_status: string; settlement_amount: string; release_tx_hash: string }>('SELECT settlement_status, settlement_amount::text, release_tx_hash FROM jobs WHERE id = $1', [jobId]);
  t.same(job, { settlement_status: 'released', settlement_amount: before.payout.toString(), release_tx_hash: res.json().txHash });
  const timeline = (await app.inject({ url: `/dashboard/api/jobs/${jobId}/timeline`, headers: session(await signIn(app, devWallet(3))) })).json();
  t.ok(timeline.events.some((e: { state: string; txHash: string | null }) => e.state === 'resolved' && e.txHash === res.json().txHash), 'the job timeline shows the resolution');
  const audit = (await app.inject({ url: '/admin/api/audit?limit=1', headers: session(asAdmin) })).json();
  t.match(audit.data[0], { actor: { kind: 'admin_wallet', id: admin.address.toLowerCase() }, action: 'job.resolve_dispute', targetId: jobId, details: { outcome: 'release' } });
  t.same((await app.inject({ url: '/admin/api/disputes', headers: session(asAdmin) })).json().data, [], 'no longer listed');
  assertError(t, await resolve(asAdmin, jobId, 'refund'), 'conflict', 409);
  t.equal(checkedAnswers(), 6, 'the disputes lists, the job view, the resolution and the audit pages keep the fleet contract (shared/src/fleet/api.ts)');
});

t.test('behavior: refund pays nothing out; the whole deposit goes back to the customer', async (t) => {
  const { app, db, escrow, asAdmin, balance, disputedJob, resolve } = await setup(t);
  const { jobId, jobKey } = await disputedJob('refunded dispute');
  t.match((await app.inject({ url: '/admin/api/disputes', headers: session(asAdmin) })).json().data, [{ jobId, reason: null, evidence: null }], 'disputed from the wallet alone: no words');
  const before = await readEscrowJob(escrow.chain, jobKey);
  const [provider0, customer0] = await Promise.all([balance(PROVIDER), balance(devWallet(3).address)]);
  const res = await resolve(asAdmin, jobId, 'refund');
  t.equal(res.statusCode, 200, res.body);
  t.equal((await readEscrowJob(escrow.chain, jobKey)).status, 'released');
  t.equal(await balance(PROVIDER), provider0, 'nothing to the provider');
  t.equal((await balance(devWallet(3).address)) - customer0, before.amount, 'the whole deposit back');
  const [job] = await db.query<{ settlement_amount: string }>('SELECT settlement_amount::text FROM jobs WHERE id = $1', [jobId]);
  t.equal(job?.settlement_amount, '0');
});

t.test('error: a customer session cannot resolve; a job not in dispute is a conflict', async (t) => {
  const { customer, asAdmin, resolve, disputedJob } = await setup(t);
  const { jobId } = await disputedJob('contested');
  assertError(t, await resolve(customer, jobId, 'refund'), 'forbidden', 403);
  t.equal((await resolve(asAdmin, jobId, 'release')).statusCode, 200);
  assertError(t, await resolve(asAdmin, jobId, 'release'), 'conflict', 409);
});
