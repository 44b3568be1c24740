import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import t from 'tap';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { openPostgres } from '@gpufarm/control-plane/db';
import { enrollAgent } from './helpers/agent.js';
import { Customer, linesOf } from './helpers/customer.js';
import { balanceAt, escrowEvents, escrowJob } from './helpers/escrow.js';
import { busyboxSpec, numberedLines } from './helpers/jobs.js';
import { Marketplace, TREASURY } from './helpers/marketplace.js';
import { PostgresServer } from './helpers/postgres-server.js';
import { TcpProxy } from './helpers/tcp-proxy.js';
import { sleep, until } from './helpers/wait.js';

/**
 * Soak, end to end, separate processes: one long job writing a numbered line every
 * millisecond while everything around it breaks: 100 link drops between the agent and the
 * control plane (a TCP proxy resets the connections), 5 agent kills (SIGKILL, started again),
 * then a restart of the marketplace's PostgreSQL server and of its chain (anvil, with its
 * state kept in a file). Every line is stored exactly once and in order, the job runs once and
 * completes, and the escrow settles to the base unit: provider, treasury and customer.
 */

// A long job, a chain and a database restarted: minutes, not the default two.
t.setTimeout(480_000);

const FARM = 'soak-farm';
const PAYOUT = privateKeyToAddress(generatePrivateKey());
/**
 * Lines the job writes, ten every 15 ms: at least 90 s, whatever the load, for the disruptions
 * to happen mid-job. A pause per line (60,000 forks of `usleep`) cost the shell 62 CPU-s of a CI
 * run at deb2218; ten lines per pause cost about a seventh (busybox sh here: 0.8 against 5.3 CPU-s
 * per 3,000 lines).
 */
const LINES = 60_000;
const DROPS = 100;
const AGENT_KILLS = 5;

/** Container starts of the job, as dockerd reports them (`docker events`). */
function watchStarts(): { starts: string[]; stop: () => void } {
  const starts: string[] = [];
  const child = spawn('docker', ['events', '--filter', 'type=container', '--filter', 'event=start', '--filter', 'label=org.gpufarm.managed=true', '--format', '{{json .}}'], { stdio: ['ignore', 'pipe', 'ignore'] });
  createInterface({ input: child.stdout }).on('line', (line) => {
    const e = JSON.parse(line) as { Action: string; Actor: { Attributes: Record<string, string> } };
    if (e.Action === 'start') starts.push(e.Actor.Attributes['org.gpufarm.job'] ?? '');
  });
  return { starts, stop: () => child.kill() };
}

const pg = await PostgresServer.start(t);
const chainDir = mkdtempSync(join(tmpdir(), 'gf-soak-chain-'));
t.teardown(() => rmSync(chainDir, { recursive: true, force: true }));
const docker = watchStarts();
t.teardown(() => docker.stop());
const market = await Marketplace.start(t, {
  postgresUrl: pg.url,
  // The chain is dumped to the file when anvil stops and loaded when it starts: a restart keeps it.
  anvilArgs: ['--state', join(chainDir, 'state.json'), '--preserve-historical-states'],
});
const proxy = await TcpProxy.start(market.url);
t.teardown(() => proxy.close());
const agent = await enrollAgent(market, { name: 'agent', farm: FARM, payout: PAYOUT, env: { GF_AGENT_SERVER: proxy.url } });
agent.start();
await market.waitForCapacity(FARM, 1);
const customer = await Customer.create(market, 1);
// The test's own reads of the job's lines; its pool reconnects after the database restart.
const db = openPostgres(market.databaseUrl, { max: 1 });
t.teardown(() => db.close());

t.test('behavior: 100 link drops, 5 agent kills, a database and a chain restart mid-job: every line stored once and in order, the job runs once, funds settle to the base unit', async (t) => {
  const { created } = await customer.createFundedJob(busyboxSpec(market.images, numberedLines(LINES, 15_000, { stderr: false, perPause: 10 }), { title: 'soak' }));
  const id = created.job.id;
  await customer.waitForStatus(id, ['RUNNING'], 90_000);
  const [assignment] = await market.query<{ id: string }>('SELECT id FROM assignments WHERE job_id = $1', [id]);
  const assignmentId = assignment!.id;

  const stored = async () => {
    const [row] = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM log_lines WHERE assignment_id = $1', [assignmentId]);
    return row!.n;
  };
  /** Waits until the agent is connected again and lines are stored past what was stored before. */
  let last = 0;
  const progress = async (what: string) => {
    const before = last;
    last = await until(
      async () => {
        if (proxy.connections === 0) return undefined;
        const n = await stored();
        return n > before ? n : undefined;
      },
      `lines to be stored again after ${what} (${before} stored before)`,
      { timeoutMs: 60_000, intervalMs: 50, describe: () => market.diagnostics(15) },
    );
  };

  let drops = 0;
  let agentRestarts = 0;
  let postgresRestarts = 0;
  let anvilRestarts = 0;
  await progress('the start');
  for (let i = 1; i <= DROPS; i++) {
    // Lines flow for a moment on each new link before it is dropped.
    await sleep(100 + Math.floor(Math.random() * 200));
    await until(() => proxy.connections > 0, `the agent's link before drop ${i}`, { intervalMs: 20 });
    if (proxy.drop() > 0) drops += 1;
    await progress(`link drop ${i}`);
    if (i % (DROPS / AGENT_KILLS) === 0) {
      await agent.current!.kill();
      agent.start();
      agentRestarts += 1;
      await progress(`agent kill ${agentRestarts}`);
    }
  }

  await pg.stop();
  await sleep(2_000);
  await pg.resume();
  postgresRestarts += 1;
  await progress('the PostgreSQL restart');

  await market.restartAnvil();
  anvilRestarts += 1;
  await progress('the anvil restart');
  t.ok(last < LINES, `every disruption happened mid-job (${last} of ${LINES} lines stored when the last one was over)`);

  const { lines, jobStatus } = await customer.tailLogs(id, { timeoutMs: 300_000 });
  t.equal(jobStatus, 'COMPLETED', 'the job completed');
  const numbers = linesOf(lines, 'stdout').map((l) => Number(/^out-(\d+)$/.exec(l.line)?.[1] ?? -1));
  const distinct = new Set(numbers.filter((n) => n >= 0 && n < LINES));
  const duplicates = numbers.length - distinct.size;
  const lost = LINES - distinct.size;
  t.comment(`lines ${LINES}, stored ${numbers.length}, drops ${drops}, agent restarts ${agentRestarts}, PostgreSQL restarts ${postgresRestarts}, anvil restarts ${anvilRestarts}, duplicates ${duplicates}, lost ${lost}`);
  t.equal(drops, DROPS, 'every drop reset a live link');
  t.equal(agentRestarts, AGENT_KILLS, 'every agent kill was followed by a restart and lines stored again');
  t.equal(duplicates, 0, 'no line stored twice');
  t.equal(lost, 0, 'no line lost');
  t.equal(
    numbers.findIndex((n, i) => n !== i),
    -1,
    'every line in order (the index of the first out of place, if any)',
  );

  t.ok(market.controlPlane.running(), 'the control plane ran through it all, one process');
  const job = await customer.getJob(id);
  t.equal(job.assignment?.exitCode, 0, 'the job ran to its end');
  const assignments = await market.query<{ id: string }>('SELECT id FROM assignments WHERE job_id = $1', [id]);
  t.equal(assignments.length, 1, 'one assignment');
  t.same(
    docker.starts.filter((j) => j === id),
    [id],
    'one container start',
  );

  // Settlement after the challenge window: provider, treasury and customer, to the base unit.
  const released = await until(
    async () => {
      const j = await customer.getJob(id);
      return j.receipt?.status === 'released' && j.receipt.transactions.release ? j : undefined;
    },
    `the release of ${id}`,
    { timeoutMs: 90_000, describe: () => market.diagnostics(15) },
  );
  const { receipt: mined } = await escrowEvents(market, released.receipt!.transactions.release as `0x${string}`);
  const onChain = await escrowJob(market, job.payment.escrowJobKey as `0x${string}`);
  t.equal(onChain.statusName, 'Released', 'released on the chain that was restarted');
  const token = job.payment.token as `0x${string}`;
  const delta = async (address: `0x${string}`) => (await balanceAt(market, token, address, mined.blockNumber)) - (await balanceAt(market, token, address, mined.blockNumber - 1n));
  t.equal(onChain.payout, BigInt(released.cost!.finalPayment), 'the escrow pays what the job cost');
  t.ok(onChain.payout > 0n, 'billed');
  t.equal(await delta(PAYOUT), onChain.payout - onChain.fee, 'the provider got the payout less the fee');
  t.equal(await delta(TREASURY), onChain.fee, 'the treasury got the fee');
  t.equal(await delta(customer.wallet.account.address), onChain.amount - onChain.payout, 'the customer got the rest of the deposit');
});
