import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { errorText, type Job } from '@gpufarm/shared';
import { canaryResult } from '@gpufarm/shared/node';
import { enrollAgent } from './helpers/agent.js';
import { Customer, linesOf } from './helpers/customer.js';
import { balanceAt, escrowEvents, escrowJob } from './helpers/escrow.js';
import { busyboxSpec, canarySpec } from './helpers/jobs.js';
import { Marketplace, TREASURY } from './helpers/marketplace.js';
import { until } from './helpers/wait.js';

/**
 * End to end across separate processes (ARCHITECTURE.md section 12): PostgreSQL, anvil, the
 * control plane (`control-plane/src/main.ts`), one real `gf-agent` with one simulated GPU,
 * dockerd and the local registry. The customer side is public HTTP and a viem wallet only.
 */

// Separate processes, real containers and a chain: minutes, not the default two.
t.setTimeout(300_000);

const run = promisify(execFile);
const FARM = 'e2e-canary';
const PAYOUT = privateKeyToAddress(generatePrivateKey());
const ITERATIONS = 100_000;

const market = await Marketplace.start(t, { challengeWindowSeconds: 8 });
const agent = await enrollAgent(market, { name: 'agent', farm: FARM, payout: PAYOUT, priceUsd: '0.50', gpus: '1x rtx-4090-24gb' });
agent.start();
await market.waitForCapacity(FARM, 1);
const customer = await Customer.create(market, 1);
const other = await Customer.create(market, 2);

/** The text of one member of a tar, read with the system's tar. */
async function untar(bytes: Buffer, member: string): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'gf-e2e-untar-'));
  try {
    writeFileSync(join(dir, 'a.tar'), bytes);
    const { stdout: names } = await run('tar', ['-tf', join(dir, 'a.tar')]);
    const name = names.split('\n').find((n) => n.replace(/^\.?\//, '') === member);
    if (!name) throw new Error(`no ${member} in the tar (it holds: ${names.trim().split('\n').join(', ')})`);
    return (await run('tar', ['-xOf', join(dir, 'a.tar'), name])).stdout;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const finished: Job[] = [];

for (const token of ['stable', 'eth'] as const) {
  t.test(`behavior: a canary job funded with ${token} runs, is RESULT_VERIFIED, downloads with matching hashes and is released with the balances split exactly`, async (t) => {
    const { created, fundTx, job: queued } = await customer.createFundedJob(canarySpec(market.images, token, ITERATIONS));
    t.equal(queued.status, 'QUEUED', 'fund-confirm reports QUEUED');
    const id = created.job.id;

    const { lines, jobStatus } = await customer.tailLogs(id);
    t.equal(jobStatus, 'COMPLETED', 'the logs end with the job COMPLETED');
    const system = linesOf(lines, 'system').map((l) => l.line);
    t.ok(system.length >= 3, `system lines tell the steps: ${JSON.stringify(system)}`);
    const ids = lines.map((l) => l.id);
    t.same(ids, [...ids].sort((a, b) => a - b), 'line ids only grow');
    t.equal(new Set(ids).size, ids.length, 'no line twice');

    const job = await customer.getJob(id);
    finished.push(job);
    t.equal(job.status, 'COMPLETED');
    t.equal(job.verificationLevel, 'RESULT_VERIFIED', 'the server recomputed the canary');
    t.equal(job.assignment?.exitCode, 0);
    t.equal(job.assignment?.farm.slug, FARM);
    t.ok(system.some((l) => l.includes(job.assignment!.farm.name)), `a system line names the farm it was matched to (${job.assignment?.farm.name})`);
    t.equal(job.assignment?.gpu.count, 1);
    t.ok(job.assignment?.startedAt && job.assignment.finishedAt, 'started and finished times');
    t.ok(job.result, 'a result');
    const result = job.result!;
    t.equal(result.hashesMatch, true);
    t.equal(result.hostHash, result.serverHash, 'host hash equals the server re-hash');
    t.ok(result.outputArtifactId && result.logArtifactId, 'output and log artifacts');
    const output = job.artifacts.find((a) => a.id === result.outputArtifactId);
    t.equal(output?.kind, 'output');
    t.equal(output?.sha256, result.serverHash);

    const download = await customer.download(result.outputArtifactId!);
    t.equal(download.redirect.status, 302);
    t.equal(download.sha256, download.sha256Header, "the bytes' SHA-256 is X-Artifact-Sha256");
    t.equal(download.sha256, result.serverHash, "the bytes' SHA-256 is the job's result.serverHash");
    t.equal(download.sizeHeader, String(download.bytes.length), 'X-Artifact-Size');
    const resultText = await untar(download.bytes, 'result.txt').catch((err: unknown) => `(unreadable: ${errorText(err)})`);
    t.equal(resultText, canaryResult(id, ITERATIONS), 'result.txt holds sha256^n(job id)');
    const logDownload = await customer.download(result.logArtifactId!);
    t.equal(logDownload.sha256, logDownload.sha256Header, 'the log artifact too');

    t.ok(job.cost, 'a cost');
    const cost = job.cost!;
    t.equal(cost.billableGpuSeconds, 60, 'a short job is billed the minimum 60 s');
    t.equal(cost.totalMicroUsd, cost.computeMicroUsd + cost.feeMicroUsd);
    t.equal(cost.computeMicroUsd, Math.ceil((60 * 500_000) / 3600), 'at the farm price');
    t.ok(BigInt(cost.finalPayment) <= BigInt(job.payment.maxPayment), 'never above maxPayment');

    const receipt = job.receipt!;
    t.equal(receipt.status, 'completed');
    t.equal(receipt.transactions.fund, fundTx, 'the receipt has the funding transaction');
    t.match(receipt.transactions.completion, /^0x[0-9a-f]{64}$/, 'and the completion transaction');
    const completion = await escrowEvents(market, receipt.transactions.completion as `0x${string}`);
    t.equal(completion.receipt.status, 'success');
    const completed = completion.logs.find((l) => l.eventName === 'JobCompleted');
    t.ok(completed, 'the completion transaction emitted JobCompleted');
    if (completed?.eventName === 'JobCompleted') {
      t.equal(completed.args.jobKey, job.payment.escrowJobKey);
      t.equal(completed.args.payout, BigInt(cost.finalPayment), 'the payout is the final payment');
      t.equal(completed.args.provider.toLowerCase(), PAYOUT.toLowerCase(), "the provider is the farm's payout address");
    }

    // After the challenge window the escrow worker releases it.
    const released = await until(
      async () => {
        const j = await customer.getJob(id);
        return j.receipt?.status === 'released' && j.receipt.transactions.release ? j : undefined;
      },
      `the release of ${id}`,
      { timeoutMs: 60_000 },
    );
    const releaseTx = released.receipt!.transactions.release as `0x${string}`;
    const { receipt: mined, logs } = await escrowEvents(market, releaseTx);
    const event = logs.find((l) => l.eventName === 'JobReleased');
    t.ok(event, 'the release transaction emitted JobReleased');
    const onChain = await escrowJob(market, job.payment.escrowJobKey as `0x${string}`);
    t.equal(onChain.statusName, 'Released');
    const before = mined.blockNumber - 1n;
    const tokenAddress = job.payment.token as `0x${string}`;
    const delta = async (address: `0x${string}`) => (await balanceAt(market, tokenAddress, address, mined.blockNumber)) - (await balanceAt(market, tokenAddress, address, before));
    const payout = BigInt(cost.finalPayment);
    const amount = BigInt(job.payment.maxPayment);
    const fee = onChain.fee;
    t.equal(onChain.payout, payout);
    if (token === 'stable') t.equal(fee, BigInt(cost.feeMicroUsd), 'the fee in tUSDC base units is feeMicroUsd');
    else t.ok(fee > 0n && fee < payout, 'an ETH fee below the payout');
    t.equal(await delta(PAYOUT), payout - fee, 'the provider gets the payout minus the fee');
    t.equal(await delta(TREASURY), fee, 'the treasury gets the fee');
    t.equal(await delta(customer.wallet.account.address), amount - payout, 'the customer gets the rest back');
    t.equal(await delta(market.deployment.escrow), -amount, 'the escrow pays out the whole deposit');
  });
}

t.test('behavior: another account cannot read the job, its logs or its artifacts (not_found)', async (t) => {
  const job = finished[0];
  if (!job) return t.fail('no finished job to read (the canary case failed)');
  for (const path of [`/v1/jobs/${job.id}`, `/v1/jobs/${job.id}/logs?cursor=0`, `/v1/artifacts/${job.result!.outputArtifactId}`, `/v1/artifacts/${job.result!.logArtifactId}`, `/v1/artifacts/${job.result!.outputArtifactId}?format=json`]) {
    const res = await other.request<{ error: { code: string } }>('GET', path);
    t.equal(res.status, 404, `GET ${path}`);
    t.equal(res.body.error?.code, 'not_found', `GET ${path}: not_found`);
  }
  const owner = await customer.request('GET', `/v1/artifacts/${job.result!.outputArtifactId}?format=json`);
  t.equal(owner.status, 200, 'while the owner can');
});

t.test('behavior: two jobs racing for the last GPU: exactly one runs, the other waits QUEUED and runs after; cancel while RUNNING is 409', async (t) => {
  const spec = busyboxSpec(market.images, 'echo started; sleep 6; echo done > /output/done.txt');
  const [a, b] = await Promise.all([customer.createJob(spec), customer.createJob(spec)]);
  const [txA, txB] = [await customer.fund(a), await customer.fund(b)];
  const confirmed = await Promise.all([customer.fundConfirm(a.job.id, txA), customer.fundConfirm(b.job.id, txB)]);
  t.same(confirmed.map((c) => c.body.job.status), ['QUEUED', 'QUEUED']);
  const ids = [a.job.id, b.job.id];

  const active = ['MATCHING', 'RUNNING'];
  let winner: string | null = null;
  let sawBothActive = false;
  await until(
    async () => {
      const jobs = await Promise.all(ids.map((id) => customer.getJob(id)));
      const running = jobs.filter((j) => active.includes(j.status));
      if (running.length > 1) sawBothActive = true;
      const r = jobs.find((j) => j.status === 'RUNNING');
      const waiting = jobs.find((j) => j.status === 'QUEUED');
      if (r && waiting) winner = r.id;
      return winner ?? undefined;
    },
    'one job RUNNING while the other is QUEUED',
    { timeoutMs: 60_000, intervalMs: 100 },
  );
  t.notOk(sawBothActive, 'never both matched to the one GPU');
  const loser = ids.find((id) => id !== winner)!;

  const cancel = await customer.request<{ error: { code: string } }>('POST', `/v1/jobs/${winner!}/cancel`, { reason: 'too late' });
  t.equal(cancel.status, 409, 'cancel while RUNNING');
  t.equal(cancel.body.error?.code, 'conflict');
  t.equal((await customer.getJob(winner!)).status, 'RUNNING', 'and it runs on');
  t.equal((await customer.getJob(loser)).status, 'QUEUED', 'the other still waits');

  const first = await customer.waitForStatus(winner!, ['COMPLETED']);
  const second = await customer.waitForStatus(loser, ['COMPLETED']);
  t.equal(first.assignment?.exitCode, 0);
  t.equal(second.assignment?.exitCode, 0);
  t.ok(Date.parse(second.assignment!.startedAt!) >= Date.parse(first.assignment!.finishedAt!), 'the second started after the first finished');
});
