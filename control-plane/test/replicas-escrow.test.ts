import { gpuFarmEscrowAbi, jobCreatedSchema } from '@gpufarm/shared';
import { createServer } from 'node:http';
import t, { type Test } from 'tap';
import { decodeFunctionData, encodeFunctionData, keccak256, type Hex } from 'viem';
import { ANVIL_ACCOUNTS } from '../src/testing/anvil.js';
import { connectChain } from '../src/chain/client.js';
import { completeJob, readEscrowJob, sameAddress } from '../src/chain/escrow.js';
import { findOperatorTx, recordSignedOperatorTx } from '../src/chain/operator-store.js';
import type { Database } from '../src/db/database.js';
import { openPostgres } from '../src/db/postgres.js';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { cancelJob } from '../src/jobs/cancel-job.js';
import { runEscrowWorkerOnce, sweepRefunds, sweepReleases, type EscrowWorkerDeps } from '../src/jobs/escrow-worker.js';
import type { EscrowDeps } from '../src/jobs/funding.js';
import { authorizePendingRefund, recordCompletion, releaseCompleted } from '../src/jobs/settlement.js';
import { findJobById } from '../src/jobs/store.js';
import { bearer, createTestKey } from './helpers/app.js';
import { buildEscrowTestApp, CHAIN_ID, escrowDepsFor, OPERATOR, sendFundingCalls, startTestChain, type TestChain } from './helpers/chain.js';
import { createPostgresTestDatabase } from './helpers/database.js';

/**
 * Two control-plane replicas on one PostgreSQL database and one chain: each has its own pool
 * and its own viem clients for the same operator key, as two processes would.
 */
const chainP = startTestChain(t, { challengeWindowSeconds: 60 });
const PROVIDER = '0x000000000000000000000000000000000000beef' as const;
const RESULT = `0x${'ab'.repeat(32)}` as const;

interface Replica {
  db: Database;
  escrow: EscrowDeps;
}

async function twoReplicas(t: Test, c: TestChain) {
  const { db, url } = await createPostgresTestDatabase(t);
  const other = openPostgres(url!);
  t.teardown(() => other.close());
  const app = await buildEscrowTestApp(t, c, { db });
  const a: Replica = { db, escrow: app.escrow };
  const b: Replica = { db: other, escrow: await escrowDepsFor(t, c) };
  const farm = await createFarm(db);
  await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 });
  await app.offerIndex.refresh();
  const customer = await createTestKey(db, { walletAddress: ANVIL_ACCOUNTS[3].address.toLowerCase() });
  /** A job created and funded in ETH through replica A's API; answers its id and escrow key. */
  const fundedJob = async () => {
    const created = jobCreatedSchema.parse(
      (await app.app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(customer.key), payload: { image: 'ghcr.io/acme/x:1', gpu: { count: 1 }, maxRuntimeSeconds: 3600, paymentToken: 'eth' } })).json(),
    );
    const tx = (await sendFundingCalls(c, c.wallet(3), created.funding!.calls)).at(-1)!;
    const confirmed = await app.app.inject({ method: 'POST', url: `/v1/jobs/${created.job.id}/fund-confirm`, headers: bearer(customer.key), payload: { txHash: tx } });
    t.equal(confirmed.statusCode, 200, 'funded');
    return { id: created.job.id, key: created.job.payment.escrowJobKey as Hex };
  };
  return { a, b, customer, fundedJob };
}

/** The operator's transactions to the escrow mined from block `from` on: function and job key, and whether each succeeded. */
async function operatorTxsSince(c: TestChain, from: bigint) {
  const latest = await c.publicClient.getBlockNumber({ cacheTime: 0 });
  const sent: Array<{ action: string; jobKey: string; ok: boolean }> = [];
  for (let n = from; n <= latest; n++) {
    const block = await c.publicClient.getBlock({ blockNumber: n, includeTransactions: true });
    for (const tx of block.transactions) {
      if (!sameAddress(tx.from, OPERATOR.address) || !tx.to || !sameAddress(tx.to, c.deployment.escrow)) continue;
      const call = decodeFunctionData({ abi: gpuFarmEscrowAbi, data: tx.input });
      const receipt = await c.publicClient.getTransactionReceipt({ hash: tx.hash });
      sent.push({ action: call.functionName, jobKey: String(call.args?.[0]).toLowerCase(), ok: receipt.status === 'success' });
    }
  }
  return sent;
}

const workerOf = (r: Replica, now?: () => Date): EscrowWorkerDeps => ({ db: r.db, escrow: r.escrow, startBlock: 0, ...(now ? { now } : {}) });

/**
 * What replica `r` does before a broadcast: signs the operator's call for one job at the next
 * nonce and records it. A test then plays the crash that follows.
 */
async function signAndRecord(r: Replica, c: TestChain, job: { key: Hex }, action: 'release' | 'authorizeRefund') {
  const operator = r.escrow.chain.operator!;
  const nonce = await c.publicClient.getTransactionCount({ address: OPERATOR.address, blockTag: 'pending' });
  const data = encodeFunctionData({ abi: gpuFarmEscrowAbi, functionName: action, args: [job.key] });
  const rawTx = await operator.signTransaction(await operator.prepareTransactionRequest({ to: c.deployment.escrow, data, nonce }));
  const key = { chainId: c.chain.id, escrowAddress: c.deployment.escrow, jobKey: job.key, action };
  await recordSignedOperatorTx(r.db, key, { sender: OPERATOR.address, nonce, txHash: keccak256(rawTx), rawTx });
  return { nonce, rawTx, hash: keccak256(rawTx), key };
}

const cancelUnrefunded = (r: Replica, accountId: string, jobId: string) =>
  cancelJob({ db: r.db, escrow: null, effects: { canceledWhileMatching: async () => {} } }, { accountId, jobId, reason: null });

/**
 * A canceled job whose refund authorization replica A signed and recorded (its next step a
 * crash, played by the test); answers the replicas, the job, the signed transaction and the first
 * block after the setup.
 */
async function canceledWithRecordedRefund(t: Test, c: TestChain) {
  const { a, b, customer, fundedJob } = await twoReplicas(t, c);
  const job = await fundedJob();
  await cancelUnrefunded(a, customer.accountId, job.id);
  const from = (await c.publicClient.getBlockNumber({ cacheTime: 0 })) + 1n;
  return { a, b, job, from, ...(await signAndRecord(a, c, job, 'authorizeRefund')) };
}

t.test('behavior: two replicas racing over the same completions, releases and refunds send each transaction exactly once', async (t) => {
  const c = await chainP;
  const { a, b, customer, fundedJob } = await twoReplicas(t, c);
  const completed = [await fundedJob(), await fundedJob(), await fundedJob()];
  const refunded = [await fundedJob(), await fundedJob(), await fundedJob()];
  const from = (await c.publicClient.getBlockNumber({ cacheTime: 0 })) + 1n;

  // Each replica settles the same finished jobs at once (the execution worker on both).
  // B measured a longer run: whichever completion is sent first, every record must be the escrow's.
  const completion = (r: Replica, id: string) => recordCompletion(r, { jobId: id, runtimeSeconds: r === a ? 600 : 660, pricePerGpuHourMicroUsd: 400_000, resultHash: RESULT, provider: PROVIDER });
  await Promise.all(completed.flatMap((job) => [completion(a, job.id), completion(b, job.id), completion(a, job.id)]));

  // Canceled jobs wait for their refund; the cancel answer, and both replicas' workers, authorize it at once.
  for (const job of refunded) await cancelUnrefunded(a, customer.accountId, job.id);
  await c.testClient.increaseTime({ seconds: 61 });
  await c.testClient.mine({ blocks: 1 });
  const later = () => new Date(Date.now() + 3_600_000);
  const cancelSide = refunded.map(async (job) => authorizePendingRefund(a, (await findJobById(a.db, job.id))!));
  await Promise.all([
    ...cancelSide,
    sweepRefunds(workerOf(a)),
    sweepRefunds(workerOf(b)),
    sweepReleases(workerOf(a, later)),
    sweepReleases(workerOf(b, later)),
    sweepReleases(workerOf(b, later)),
  ]);
  await Promise.all([runEscrowWorkerOnce(workerOf(a, later)), runEscrowWorkerOnce(workerOf(b, later))]);

  const sent = await operatorTxsSince(c, from);
  t.same(sent.filter((s) => !s.ok), [], 'no operator transaction reverted');
  const count = (action: string, key: string) => sent.filter((s) => s.action === action && s.jobKey === key.toLowerCase()).length;
  for (const job of completed) {
    t.equal(count('completeJob', job.key), 1, `completeJob of ${job.id} sent once`);
    t.equal(count('release', job.key), 1, `release of ${job.id} sent once`);
    const onChain = await readEscrowJob(a.escrow.chain, job.key);
    t.equal(onChain.status, 'released');
    const row = (await findJobById(a.db, job.id))!;
    t.equal(row.settlement_status, 'released');
    t.same([row.settlement_amount, row.compute_seconds], [onChain.payout.toString(), Number(onChain.computeSeconds)], 'the record is what the escrow holds');
    const [entries] = await a.db.query<{ charges: number; releases: number }>(
      "SELECT count(*) FILTER (WHERE type = 'charge')::int AS charges, count(*) FILTER (WHERE type = 'release')::int AS releases FROM billing_entries WHERE job_id = $1",
      [job.id],
    );
    t.same(entries, { charges: 1, releases: 1 }, 'one charge and one release entry');
  }
  for (const job of refunded) {
    t.equal(count('authorizeRefund', job.key), 1, `authorizeRefund of ${job.id} sent once`);
    t.equal((await readEscrowJob(a.escrow.chain, job.key)).status, 'refund_authorized');
    t.equal((await findJobById(b.db, job.id))!.refund_status, 'authorized');
  }
  t.equal(sent.length, 9, 'nine actions, nine operator transactions, no nonce lost to a collision');
});

t.test('behavior: a completion sent but not recorded (a crash), recorded later from other figures: the record is what the escrow holds', async (t) => {
  const c = await chainP;
  const { a, b, fundedJob } = await twoReplicas(t, c);
  const job = await fundedJob();
  // Replica A sent the completion through the ledger for 60 s and died before writing the job's record.
  const sent = await completeJob(a.escrow.chain, { jobKey: job.key, payout: 7_000_000_000_000n, fee: 600_000_000_000n, computeSeconds: 60, resultHash: RESULT, provider: PROVIDER }, a.db);
  const { job: row, payout } = await recordCompletion(b, { jobId: job.id, runtimeSeconds: 900, pricePerGpuHourMicroUsd: 400_000, resultHash: RESULT, provider: PROVIDER });
  t.equal(payout, 7_000_000_000_000n, 'the payout the escrow holds');
  t.same([row.settlement_amount, row.compute_seconds, row.completion_tx_hash], ['7000000000000', 60, sent.txHash], 'recorded from the escrow, not from the second call');
});

t.test('behavior: a transaction recorded but never broadcast (a crash in between) is broadcast as it is, not signed again', async (t) => {
  const c = await chainP;
  const { a, b, fundedJob } = await twoReplicas(t, c);
  const job = await fundedJob();
  await recordCompletion(a, { jobId: job.id, runtimeSeconds: 60, pricePerGpuHourMicroUsd: 400_000, resultHash: RESULT, provider: PROVIDER });
  await c.testClient.increaseTime({ seconds: 61 });
  await c.testClient.mine({ blocks: 1 });
  const from = (await c.publicClient.getBlockNumber({ cacheTime: 0 })) + 1n;
  // Replica A signed `release` and recorded it, then died before broadcasting.
  const { hash, key } = await signAndRecord(a, c, job, 'release');

  const released = await releaseCompleted(b, (await findJobById(b.db, job.id))!);
  t.equal(released.release_tx_hash, hash, 'replica B broadcast the recorded transaction');
  const sent = await operatorTxsSince(c, from);
  t.same(sent, [{ action: 'release', jobKey: job.key.toLowerCase(), ok: true }], 'one release on chain');
  t.equal((await findOperatorTx(a.db, key))?.state, 'mined');
});

t.test('behavior: a transaction mined but not recorded (a crash after the send) is found by its receipt, not sent again', async (t) => {
  const c = await chainP;
  const { a, b, job, from, rawTx, hash } = await canceledWithRecordedRefund(t, c);
  await c.publicClient.waitForTransactionReceipt({ hash: await c.publicClient.sendRawTransaction({ serializedTransaction: rawTx }) });

  t.equal(await sweepRefunds(workerOf(b)), 1, 'the worker settles the refund');
  const row = (await findJobById(a.db, job.id))!;
  t.equal(row.refund_status, 'authorized');
  t.equal(row.refund_authorize_tx_hash, hash, 'recorded with the transaction already mined');
  t.same(await operatorTxsSince(c, from), [{ action: 'authorizeRefund', jobKey: job.key.toLowerCase(), ok: true }], 'one authorization on chain');
});

t.test('behavior: a recorded transaction whose nonce went to another is signed again, once', async (t) => {
  const c = await chainP;
  const { a, b, job, from, nonce, hash, key } = await canceledWithRecordedRefund(t, c);
  // The node lost it and the nonce went to something else the operator sent: it can never be mined.
  await c.publicClient.waitForTransactionReceipt({ hash: await a.escrow.chain.operator!.sendTransaction({ to: OPERATOR.address, value: 0n, nonce }) });

  const after = await authorizePendingRefund(b, (await findJobById(b.db, job.id))!);
  t.equal(after.refund_status, 'authorized');
  t.not(after.refund_authorize_tx_hash, hash, 'a new signing');
  t.same(await operatorTxsSince(c, from), [{ action: 'authorizeRefund', jobKey: job.key.toLowerCase(), ok: true }], 'one authorization on chain');
  const recorded = await findOperatorTx(a.db, key);
  t.equal(recorded?.attempts, 2);
  t.equal(recorded?.state, 'mined');
});

/** A JSON-RPC proxy to anvil that answers `eth_getTransactionReceipt` with 502 while `failing` is set. */
async function receiptFailingProxy(t: Test, c: TestChain) {
  const state = { failing: true, url: '' };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      if (state.failing && (JSON.parse(body) as { method?: string }).method === 'eth_getTransactionReceipt') {
        res.writeHead(502).end('bad gateway');
        return;
      }
      fetch(c.anvil.rpcUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then(
        async (answer) => res.writeHead(answer.status, { 'content-type': 'application/json' }).end(await answer.text()),
        () => res.writeHead(502).end(),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => server.close(resolve)));
  state.url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return state;
}

t.test('error: a receipt lookup that fails is not read as a dropped transaction: nothing is signed again', async (t) => {
  const c = await chainP;
  const { a, b, job, from, rawTx, hash, key } = await canceledWithRecordedRefund(t, c);
  // Mined, and the operator's nonce moved past it, but its outcome was never recorded.
  await c.publicClient.waitForTransactionReceipt({ hash: await c.publicClient.sendRawTransaction({ serializedTransaction: rawTx }) });

  const proxy = await receiptFailingProxy(t, c);
  const chain = connectChain({ rpcUrl: proxy.url, chainId: CHAIN_ID, escrowAddress: c.deployment.escrow, operatorPrivateKey: OPERATOR.privateKey, timeoutMs: 1_000 });
  const flaky: Replica = { db: b.db, escrow: { chain, health: b.escrow.health } };
  await t.rejects(authorizePendingRefund(flaky, (await findJobById(b.db, job.id))!), { name: 'ChainError', code: 'chain_unavailable' }, 'the next pass tries again');
  t.equal((await findOperatorTx(a.db, key))?.state, 'sent', 'still the recorded transaction');
  proxy.failing = false;
  t.equal((await authorizePendingRefund(flaky, (await findJobById(b.db, job.id))!)).refund_authorize_tx_hash, hash, 'its receipt, once the node answers');
  t.same(await operatorTxsSince(c, from), [{ action: 'authorizeRefund', jobKey: job.key.toLowerCase(), ok: true }], 'one authorization on chain');
});
