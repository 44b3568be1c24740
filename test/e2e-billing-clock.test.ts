import t, { type Test } from 'tap';
import type { Hex } from 'viem';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { AGENT_ENROLL_PATH, enrollResponseSchema, type AssignmentStatusMessage } from '@gpufarm/shared';
import { AgentSocket, enrollBody, heartbeat, hello, runChallenge, statusMessage, testInventory, uploadOutput } from '@gpufarm/control-plane/testing/agent-client';
import { Customer, linesOf } from './helpers/customer.js';
import { escrowJob } from './helpers/escrow.js';
import { MAX_PRICE_USD } from './helpers/jobs.js';
import { Marketplace } from './helpers/marketplace.js';

/**
 * A machine cannot bill time by its clock: across separate processes (PostgreSQL, anvil with the
 * escrow, the control plane), a customer funds jobs from a wallet and a scripted agent on a real
 * WebSocket runs them, reporting a start a day in the past, then a finish a day in the future.
 * Each job is billed the runtime the server saw (here a few seconds, so the minimum billing),
 * never its maxRuntimeSeconds, and the escrow's completion on anvil carries that figure.
 */

t.setTimeout(300_000);

const FARM = 'e2e-clock';
const PAYOUT = privateKeyToAddress(generatePrivateKey());
const DAY_MS = 86_400_000;
const MAX_RUNTIME_SECONDS = 3600;

const market = await Marketplace.start(t);
const enrollmentToken = await market.createEnrollmentToken({ farm: FARM, region: 'us-east', priceUsd: '0.50', payout: PAYOUT });
const enrolled = await fetch(`${market.url}${AGENT_ENROLL_PATH}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(enrollBody(enrollmentToken, testInventory({ gpus: 1 }))) });
if (enrolled.status !== 201) throw new Error(`enroll answered ${enrolled.status}: ${await enrolled.text()}`);
const { machineToken } = enrollResponseSchema.parse(await enrolled.json());
const agent = await AgentSocket.connect(market.url, machineToken);
t.teardown(() => agent.close());
agent.send(hello(testInventory({ gpus: 1 })));
await agent.next('welcome');
// The link lives on heartbeats (the marketplace's interval is 1 s).
const beats = setInterval(() => agent.send(heartbeat()), 500);
t.teardown(() => clearInterval(beats));
await runChallenge(agent);
await market.waitForCapacity(FARM, 1);
const customer = await Customer.create(market, 1);

/**
 * Runs a funded job on the scripted agent, which reports the times `times` gives it (from the
 * wall clock when it started), and returns the job once COMPLETED.
 */
async function runReporting(t: Test, times: (startedMs: number) => { startedAt: string; finishedAt: string }) {
  const { job: queued } = await customer.createFundedJob({
    image: market.images.busybox.reference,
    command: ['true'],
    gpu: { count: 1 },
    maxRuntimeSeconds: MAX_RUNTIME_SECONDS,
    maxPricePerGpuHour: MAX_PRICE_USD,
    paymentToken: 'stable',
  });
  const { assignment } = await agent.next('assign', (m) => m.assignment.jobId === queued.id, 60_000);
  const id = assignment.assignmentId;
  const reported = times(Date.now());
  const status = (state: AssignmentStatusMessage['state'], extra: Partial<AssignmentStatusMessage> = {}) =>
    statusMessage(id, state, { imageDigest: assignment.imageDigest, startedAt: reported.startedAt, ...extra });
  agent.send({ type: 'assignment.accepted', assignmentId: id });
  agent.send(status('running'));
  await agent.barrier();
  const exit = { finishedAt: reported.finishedAt, exitCode: 0, oomKilled: false, timedOut: false };
  agent.send(status('exited', exit));
  const output = await uploadOutput({ url: market.url, machineToken, assignmentId: id, files: { 'a.txt': 'done\n' } });
  agent.send(status('finished', { ...exit, outputs: [output] }));
  await agent.barrier();
  const job = await customer.waitForStatus(queued.id, ['COMPLETED']);
  return { job, reported };
}

/** The job is billed what the server saw, on the API and in the escrow's completion on anvil. */
async function expectServerBilled(t: Test, job: Awaited<ReturnType<typeof runReporting>>['job'], reported: { startedAt: string; finishedAt: string }) {
  const startedAt = Date.parse(job.assignment!.startedAt!);
  const finishedAt = Date.parse(job.assignment!.finishedAt!);
  t.not(job.assignment?.startedAt, reported.startedAt, 'startedAt is when the server received the start, not the machine\'s');
  t.not(job.assignment?.finishedAt, reported.finishedAt, 'finishedAt is when the server received the end');
  const seen = Math.ceil((finishedAt - startedAt) / 1000);
  const billable = Math.max(seen, job.pricing.minBillingSeconds);
  t.equal(job.cost?.billableGpuSeconds, billable, `billed the ${seen} s the server saw (at least the minimum billing), not maxRuntimeSeconds`);
  t.equal(job.receipt?.computeSeconds, billable, 'the receipt\'s computeSeconds is the billed figure');
  const onChain = await escrowJob(market, job.payment.escrowJobKey as Hex);
  t.equal(onChain.statusName, 'Completed');
  t.equal(Number(onChain.computeSeconds), billable, 'the escrow\'s completion on anvil carries the billed seconds');
  t.equal(onChain.payout, BigInt(job.cost!.finalPayment), 'and the payment for them');
  t.equal(job.receipt?.amount, job.cost?.finalPayment);
  const { lines } = await customer.tailLogs(job.id);
  const completed = linesOf(lines, 'system').find((l) => l.line.startsWith('completed:'))?.line;
  t.match(completed, new RegExp(`runtime ${seen} s: the shorter of ${seen} s from the start to the end as the service received them and \\d+ s as the machine reports them$`), 'the completion line gives both clocks');
}

t.test('behavior: a machine reporting a start a day ago is billed the runtime the server saw; the escrow completion on anvil is that figure', async (t) => {
  const { job, reported } = await runReporting(t, (now) => ({ startedAt: new Date(now - DAY_MS).toISOString(), finishedAt: new Date(now).toISOString() }));
  await expectServerBilled(t, job, reported);
});

t.test('behavior: a machine reporting a finish a day ahead is billed the runtime the server saw; the escrow completion on anvil is that figure', async (t) => {
  const { job, reported } = await runReporting(t, (now) => ({ startedAt: new Date(now).toISOString(), finishedAt: new Date(now + DAY_MS).toISOString() }));
  await expectServerBilled(t, job, reported);
});
