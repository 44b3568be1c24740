import t from 'tap';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { enrollAgent } from './helpers/agent.js';
import { Customer, linesOf } from './helpers/customer.js';
import { expectPaidOnRelease } from './helpers/escrow.js';
import { busyboxSpec } from './helpers/jobs.js';
import { Marketplace } from './helpers/marketplace.js';
import { until } from './helpers/wait.js';

/**
 * A job that floods its log with 2 GiB, at the production limits: the service stores the first
 * 100 MiB of lines, the agent's log artifact keeps the first and last 32 MiB, the job completes
 * billed and the provider is paid. Before the cap the log upload was refused (413), the run
 * failed and was retried three times, then refunded.
 */

// 2 GiB through Docker's log driver, the agent and the link on two cores: minutes, and past ten
// when the cores are shared with the rest of a CI run on a slow machine.
t.setTimeout(900_000);

const FARM = 'e2e-log-flood';
const PAYOUT = privateKeyToAddress(generatePrivateKey());
const FLOOD_BYTES = 2 * 1024 ** 3;
const LINE_CHARS = 4000;
const KEEP_BYTES = 32 * 1024 ** 2;

t.test('behavior: a job writing 2 GiB of log completes, billed, its log artifact cut to its first and last 32 MiB; the provider is paid on release', async (t) => {
  const market = await Marketplace.start(t);
  const agent = await enrollAgent(market, { name: 'agent', farm: FARM, payout: PAYOUT, priceUsd: '0.60', gpus: '1x rtx-4090-24gb' });
  agent.start();
  await market.waitForCapacity(FARM, 1);
  const customer = await Customer.create(market, 1);
  const started = Date.now();
  const { created } = await customer.createFundedJob(
    busyboxSpec(market.images, `line=$(head -c ${LINE_CHARS} /dev/zero | tr '\\0' x); yes "$line" | head -c ${FLOOD_BYTES}; echo; echo done >&2`, { title: 'floods its log' }),
  );
  const { lines, jobStatus } = await customer.tailLogs(created.job.id, { timeoutMs: 780_000 });
  t.equal(jobStatus, 'COMPLETED', 'its own log is not a failure of the machine');
  // The job can complete before its agent has shipped the lines it wrote (its outbox lags a 2 GiB
  // flood): they are stored when they come, and the cap's own line with the line that reaches it.
  const capLine = await until(
    async () => {
      const system = await market.query<{ line: string }>(`SELECT line FROM log_lines WHERE job_id = $1 AND stream = 'system' AND line LIKE 'log limit reached:%'`, [created.job.id]);
      return system[0]?.line;
    },
    'the log cap line',
    { timeoutMs: 180_000, intervalMs: 500 },
  );
  t.match(capLine, /^log limit reached: this job's logs passed 104857600 bytes/, 'the service says it stopped storing lines');
  const seen = linesOf(lines, 'system').map((l) => l.line);
  t.comment(`the cap line ${seen.some((l) => l.startsWith('log limit reached:')) ? 'came before' : 'came after'} the tail saw the job end`);
  const job = await customer.getJob(created.job.id);
  t.equal(job.assignment?.exitCode, 0);
  t.ok(job.cost && job.cost.totalMicroUsd > 0, 'billed for the time it ran');
  // The test's challenge window is short: on a busy machine the release may already be mined.
  t.match(job.receipt?.status, /^(completed|released)$/, 'the completion is on chain');
  const [runs] = await market.query<{ n: number }>('SELECT count(*)::int AS n FROM assignments WHERE job_id = $1', [created.job.id]);
  t.equal(runs!.n, 1, 'it ran once: the log upload did not fail');
  const log = await customer.download(job.result!.logArtifactId!);
  t.equal(log.sha256, log.sha256Header);
  t.ok(log.bytes.length <= 2 * KEEP_BYTES + 64 * 1024, `the log artifact keeps at most 32 MiB at each end (${log.bytes.length} bytes)`);
  const cut = log.bytes
    .toString('utf8')
    .split('\n')
    .find((l) => l.includes('"log cut: '));
  t.ok(cut, 'a system line marks the cut');
  t.comment(`2 GiB of log: the job ran ${Math.round((Date.now() - started) / 1000)} s end to end; log artifact ${log.bytes.length} bytes; ${cut ? JSON.parse(cut).line : ''}`);
  await expectPaidOnRelease(t, market, customer, job, PAYOUT);
});
