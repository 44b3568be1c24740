import t, { type Test } from 'tap';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import type { LogLine } from '@gpufarm/shared';
import { pushRandomImage } from '@gpufarm/agent/testing/docker';
import { enrollAgent, type TestAgent } from './helpers/agent.js';
import { Customer, linesOf, outputOf } from './helpers/customer.js';
import { busyboxSpec, expected, numberedLines } from './helpers/jobs.js';
import { Marketplace } from './helpers/marketplace.js';
import { sleep, until } from './helpers/wait.js';

/** The file's own test: a teardown registered on it runs when the file ends, not with a subtest. */
const fileTest = t;

/**
 * End to end, separate processes: agents that die. The control plane marks a silent machine
 * offline after 3 s and requeues its jobs 30 s later (GF_MACHINE_OFFLINE_SECONDS,
 * GF_MACHINE_LOST_GRACE_SECONDS), so a restart within that keeps the job where it was: an agent
 * killed and started again took 15 s to link up on a loaded 2-core machine.
 */

// Separate processes, real containers and a chain, and a requeue that waits 33 s: minutes.
t.setTimeout(480_000);

const market = await Marketplace.start(t, { env: { GF_MACHINE_OFFLINE_SECONDS: '3', GF_MACHINE_LOST_GRACE_SECONDS: '30' } });
const agentA = await enrollAgent(market, { name: 'agent-a', farm: 'e2e-farm-a', payout: privateKeyToAddress(generatePrivateKey()), gpus: '1x rtx-4090-24gb' });
agentA.start();
await market.waitForCapacity('e2e-farm-a', 1);
const customer = await Customer.create(market, 1);

/** Each assignment's lines numbered 0..n-1 exactly once (what the agent sent, stored once). */
function checkSeqs(t: Test, lines: LogLine[], assignmentId: string): void {
  const seqs = lines.filter((l) => l.assignmentId === assignmentId).map((l) => l.seq);
  t.same(seqs, Array.from({ length: seqs.length }, (_, i) => i), `assignment ${assignmentId}: seqs 0..${seqs.length - 1}, none lost or twice`);
}

t.test('behavior: the agent is killed (SIGKILL) and started again mid-job: no log line is lost or duplicated, the job runs once', async (t) => {
  const COUNT = 150;
  const { created } = await customer.createFundedJob(busyboxSpec(market.images, `${numberedLines(COUNT, 60_000)}; echo ran >> /output/runs.txt`, { title: 'numbered lines' }));
  const id = created.job.id;
  const seen: LogLine[] = [];
  await until(
    async () => {
      const res = await customer.request<{ data: LogLine[] }>('GET', `/v1/jobs/${id}/logs?cursor=0&limit=1000&stream=stdout`);
      seen.splice(0, seen.length, ...res.body.data);
      return seen.length >= 15;
    },
    'the first 15 stdout lines',
    { timeoutMs: 60_000, describe: () => market.diagnostics(15) },
  );
  await agentA.current!.kill();
  await sleep(1000);
  agentA.start();

  const { lines, jobStatus } = await customer.tailLogs(id, { timeoutMs: 90_000 });
  t.equal(jobStatus, 'COMPLETED');
  const job = await customer.getJob(id);
  t.equal(job.assignment?.exitCode, 0);
  t.equal(job.assignment?.farm.slug, 'e2e-farm-a', 'it stayed on the same machine');
  t.same(linesOf(lines, 'stdout').map((l) => l.line), expected('out', COUNT), 'every stdout line once, in order');
  t.same(outputOf(lines, 'stderr').map((l) => l.line), expected('err', COUNT), 'every stderr line once, in order');
  const assignments = new Set(lines.filter((l) => l.stream !== 'system').map((l) => l.assignmentId));
  t.equal(assignments.size, 1, 'one assignment ran it');
  for (const assignmentId of assignments) checkSeqs(t, lines, assignmentId);
  const ids = lines.map((l) => l.id);
  t.equal(new Set(ids).size, ids.length, 'no line id twice');
  // Simulated GPUs cap it at HOST_REPORTED; the gap named last means the restored run's signed record checked out.
  t.equal(job.verificationLevel, 'HOST_REPORTED');
  t.ok(linesOf(lines, 'system').some((l) => l.line.startsWith('verified: HOST_REPORTED (as the machine reports it: the machine is simulated')), 'every check but the machine\'s GPUs held');
});

let agentB: TestAgent | null = null;
/** The image one machine holds after the image test, and that machine's farm. */
let held: { farm: string; reference: string } | null = null;

t.test('behavior: a machine that disappears: its job is requeued onto a second agent and completed there', async (t) => {
  // B is enrolled and verified first, then drained by its own agent, so the job can only start on A;
  // A is killed right after B is undrained: the job's 20 s outlive that however loaded the machine is.
  agentB = await enrollAgent(market, { name: 'agent-b', farm: 'e2e-farm-b', payout: privateKeyToAddress(generatePrivateKey()), gpus: '1x rtx-4090-24gb' });
  agentB.start();
  await market.waitForCapacity('e2e-farm-b', 1);
  await agentB.command(['drain', '--reason', 'until the job runs on A']);
  await market.waitForNoCapacity('e2e-farm-b');
  const { created } = await customer.createFundedJob(busyboxSpec(market.images, 'echo started; sleep 20; echo done > /output/done.txt; echo done', { title: 'outlives its machine' }));
  const id = created.job.id;
  const onA = await customer.waitForStatus(id, ['RUNNING'], 60_000);
  t.equal(onA.assignment?.farm.slug, 'e2e-farm-a');
  await agentB.command(['undrain']);
  await market.waitForCapacity('e2e-farm-b', 1);
  t.equal((await customer.getJob(id)).status, 'RUNNING', 'still running on A when A is killed');
  await agentA.current!.kill();

  const { lines, jobStatus } = await customer.tailLogs(id, { timeoutMs: 120_000 });
  t.equal(jobStatus, 'COMPLETED');
  const job = await customer.getJob(id);
  t.equal(job.assignment?.farm.slug, 'e2e-farm-b', 'it completed on the second machine');
  t.equal(job.assignment?.exitCode, 0);
  t.same(linesOf(lines, 'stdout').map((l) => l.line).slice(-2), ['started', 'done'], 'the second run ran to its end');
  const assignments = [...new Set(lines.filter((l) => l.stream !== 'system').map((l) => l.assignmentId))];
  t.ok(assignments.length >= 1, `assignments with output: ${assignments.join(', ')}`);
  for (const assignmentId of assignments) checkSeqs(t, lines, assignmentId);
  t.ok(linesOf(lines, 'system').length >= 2, `system lines: ${JSON.stringify(linesOf(lines, 'system').map((l) => l.line))}`);
  t.equal(job.result?.hashesMatch, true);
});

t.test('behavior: of two equal machines, a job goes to the one whose agent holds its image; the estimate says it is cached', async (t) => {
  const b = agentB;
  if (!b) throw new Error('agent B was not enrolled: the test before failed');
  agentA.start();
  await market.waitForCapacity('e2e-farm-a', 1);
  await market.waitForCapacity('e2e-farm-b', 1);
  // Which machine wins when neither holds the image (price, tier, uptime, id): the image must overturn that.
  const control = await customer.createFundedJob(busyboxSpec(market.images, 'echo control', { title: 'no image held' }));
  const winner = (await customer.waitForStatus(control.created.job.id, ['COMPLETED'], 90_000)).assignment!.farm.slug;
  const [first, second] = winner === 'e2e-farm-a' ? [agentA, b] : [b, agentA];
  const holderFarm = winner === 'e2e-farm-a' ? 'e2e-farm-b' : 'e2e-farm-a';

  // The other machine pulls an image of its own while the winner is drained. It stays in the
  // registry for the whole file: the next test's machines pull it too.
  const image = await pushRandomImage(fileTest, 64 * 1024);
  await first.command(['drain', '--reason', 'so that the other machine pulls the image']);
  await market.waitForNoCapacity(winner);
  const pulled = await customer.createFundedJob(busyboxSpec(market.images, 'echo pulled', { title: 'pulls the image', image: image.reference }));
  t.equal((await customer.waitForStatus(pulled.created.job.id, ['COMPLETED'], 90_000)).assignment?.farm.slug, holderFarm, 'the image was pulled on the other machine');
  await first.command(['undrain']);
  await market.waitForCapacity(winner, 1);
  t.ok(second.machineId, 'both machines are offered again');

  // Once its heartbeat reported the image, a new job's estimate says so.
  const spec = busyboxSpec(market.images, 'echo warm', { title: 'starts warm', image: image.reference });
  let assumptions: string[] = [];
  await until(
    async () => {
      const created = await customer.createJob(spec);
      assumptions = created.estimate.assumptions;
      return assumptions.some((a) => a.startsWith('the image is cached on 1 machine of the market now'));
    },
    'an estimate that says the image is cached on one machine',
    { timeoutMs: 60_000, intervalMs: 2_000, describe: () => JSON.stringify(assumptions) },
  );
  const warm = await customer.createFundedJob(spec);
  const done = await customer.waitForStatus(warm.created.job.id, ['COMPLETED'], 90_000);
  t.equal(done.assignment?.farm.slug, holderFarm, `the job went to the machine that holds its image, not to ${winner}, which won when neither did`);
  t.equal(done.startup?.phases.pull.status, 'skipped', 'and it started without a pull');
  held = { farm: holderFarm, reference: image.reference };
});

t.test('behavior: the image never outbids the price: a holder over the customer\'s cap, or dearer than a machine without the image, is not picked', async (t) => {
  const h = held;
  if (!h) throw new Error('no machine holds an image: the test before failed');
  const sameFit = { gpus: '1x rtx-4090-24gb', region: 'europe-west' };

  // The holder asks $0.50 per GPU-hour; a machine at $0.40 holds nothing; the customer pays at most $0.45.
  const capped = await enrollAgent(market, { name: 'agent-c', farm: 'e2e-farm-c', payout: privateKeyToAddress(generatePrivateKey()), priceUsd: '0.40', ...sameFit });
  capped.start();
  await market.waitForCapacity('e2e-farm-c', 1);
  const underCap = await customer.createFundedJob(busyboxSpec(market.images, 'echo under the cap', { title: 'holder over the cap', image: h.reference, maxPricePerGpuHour: '0.45' }));
  const first = await customer.waitForStatus(underCap.created.job.id, ['COMPLETED'], 90_000);
  t.equal(first.assignment?.farm.slug, 'e2e-farm-c', `the job went to the machine within its cap, not to ${h.farm}, which holds its image at $0.50`);

  // Now two machines report it ($0.50 and $0.40); one at $0.30 of the same class and region does not.
  // (The agents share this host's Docker, so none of them pulls: what counts is what each reports.)
  const cheaper = await enrollAgent(market, { name: 'agent-d', farm: 'e2e-farm-d', payout: privateKeyToAddress(generatePrivateKey()), priceUsd: '0.30', ...sameFit });
  cheaper.start();
  await market.waitForCapacity('e2e-farm-d', 1);
  const job = await customer.createFundedJob(busyboxSpec(market.images, 'echo cheaper', { title: 'cheaper without the image', image: h.reference }));
  const second = await customer.waitForStatus(job.created.job.id, ['COMPLETED'], 90_000);
  t.equal(second.assignment?.farm.slug, 'e2e-farm-d', `the job went to the cheapest machine, which does not hold its image, not to ${h.farm}, which does`);
});
