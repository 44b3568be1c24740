import t from 'tap';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { enrollAgent } from './helpers/agent.js';
import { Customer, linesOf } from './helpers/customer.js';
import { busyboxSpec } from './helpers/jobs.js';
import { Marketplace } from './helpers/marketplace.js';

/**
 * End to end, separate processes: `deterministic: true` goes from the creation request to the
 * job's row, into the assignment the real agent receives, and into the container as
 * `GF_DETERMINISTIC=1`; a job without it sees no such variable.
 */

t.setTimeout(300_000);

const FARM = 'e2e-deterministic';
const market = await Marketplace.start(t);
const agent = await enrollAgent(market, { name: 'agent', farm: FARM, payout: privateKeyToAddress(generatePrivateKey()), priceUsd: '0.60', gpus: '2x rtx-4090-24gb' });
agent.start();
await market.waitForCapacity(FARM, 2);
const customer = await Customer.create(market, 1);

t.test('behavior: a job created with deterministic: true is recorded so, its assignment carries it, and its container sees GF_DETERMINISTIC=1', async (t) => {
  const script = 'echo "GF_DETERMINISTIC=${GF_DETERMINISTIC:-unset}"; echo same > /output/out.txt';
  // One wallet funds both: one after the other, so their nonces do not collide.
  const declared = await customer.createFundedJob(busyboxSpec(market.images, script, { deterministic: true, title: 'deterministic' }));
  const plain = await customer.createFundedJob(busyboxSpec(market.images, script, { title: 'not declared' }));
  for (const [{ created }, expected] of [[declared, '1'], [plain, 'unset']] as const) {
    const id = created.job.id;
    const { lines, jobStatus } = await customer.tailLogs(id);
    t.equal(jobStatus, 'COMPLETED');
    t.same(linesOf(lines, 'stdout').map((l) => l.line), [`GF_DETERMINISTIC=${expected}`], `${created.job.id}: the container saw ${expected}`);
    const job = await customer.getJob(id);
    t.notOk('deterministic' in job, 'the spec\'s job object has no deterministic field, so GET /v1/jobs/:id shows none');
    const [row] = await market.query<{ deterministic: boolean }>('SELECT deterministic FROM jobs WHERE id = $1', [id]);
    t.equal(row?.deterministic, expected === '1', 'recorded on the job');
    const [assignment] = await market.query<{ spec: { deterministic?: boolean } }>('SELECT spec FROM assignments WHERE job_id = $1', [id]);
    t.equal(assignment?.spec.deterministic, expected === '1' ? true : undefined, 'the assignment carries it (absent: false)');
  }
});
