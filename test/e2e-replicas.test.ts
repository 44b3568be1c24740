import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { Hex } from 'viem';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { createClient, GfError } from '@gpufarm/client';
import { gpuFarmEscrowAbi, jsonLogLines, type Job } from '@gpufarm/shared';
import { S3_BLOB_PREFIX } from '@gpufarm/control-plane/artifacts';
import { s3rverObjectPath } from '@gpufarm/control-plane/testing';
import { agentLinksByServer } from '@gpufarm/scripts/cluster/haproxy';
import { enrollAgent, type TestAgent } from './helpers/agent.js';
import { Customer, linesOf, outputOf } from './helpers/customer.js';
import { expectPaidOnRelease } from './helpers/escrow.js';
import { busyboxSpec, expected, numberedLines } from './helpers/jobs.js';
import { Marketplace } from './helpers/marketplace.js';
import { until } from './helpers/wait.js';

/**
 * Two control-plane replicas on one PostgreSQL database behind HAProxy (scripts/src/cluster/
 * haproxy.ts), artifacts in s3rver, real agents and containers. The agents know only HAProxy's
 * URL; which replica holds a link is read from HAProxy's stats (the agents' backend).
 */

t.setTimeout(600_000);

const FARM = 'e2e-replicas';
const PAYOUT = privateKeyToAddress(generatePrivateKey());
// cp1 alone runs the matcher and takes agent links only when cp2 cannot, so the agent links to
// cp2 and every assignment is made on cp1: one replica makes it, the other hands it to the agent.
const market = await Marketplace.start(t, {
  replicas: 2,
  challengeWindowSeconds: 8,
  replica: (i) => (i === 0 ? { agentLinksBackup: true } : { env: { GF_MATCHER: 'false' } }),
});
const cluster = market.cluster!;
const customer = await Customer.create(market, 1);
// The agent's own reconnect settings, not the quick ones of the other e2e tests: the failover
// figure is the one a farm gets.
const agent = await enrollAgent(market, { name: 'agent', farm: FARM, payout: PAYOUT, env: { GF_AGENT_RECONNECT_INITIAL_MS: '500', GF_AGENT_RECONNECT_MAX_MS: '30000' } });
agent.start();
await market.waitForCapacity(FARM, 1);

/** The replica holding the agent's link, once exactly one holds it. */
async function linkHolder(what: string): Promise<(typeof cluster.replicas)[number]> {
  const name = await until(
    async () => {
      const links = await agentLinksByServer(cluster.haproxy.statsUrl);
      const holders = [...links].filter(([, n]) => n > 0);
      return holders.length === 1 && holders[0]![1] === 1 ? holders[0]![0] : undefined;
    },
    what,
    { timeoutMs: 30_000, intervalMs: 50, describe: () => market.diagnostics(10) },
  );
  return cluster.replicas.find((r) => r.name === name)!;
}

const linksUp = (a: TestAgent) => jsonLogLines(a.current?.output() ?? '').filter((l) => l.msg.startsWith('link up: ')).length;

/** The job's assignments and its JobCompleted events on the chain. */
async function runsOf(job: Job): Promise<{ assignments: number; completions: number }> {
  const [{ n }] = (await market.query<{ n: number }>('SELECT count(*)::int AS n FROM assignments WHERE job_id = $1', [job.id])) as [{ n: number }];
  const events = await market.publicClient.getContractEvents({ address: market.deployment.escrow, abi: gpuFarmEscrowAbi, eventName: 'JobCompleted', args: { jobKey: job.payment.escrowJobKey as Hex }, fromBlock: 0n });
  return { assignments: n, completions: events.length };
}

const finished: Job[] = [];

t.test('behavior: an assignment made for a job created on replica A reaches the agent linked to replica B, and runs', async (t) => {
  const b = await linkHolder('the agent to hold one link');
  const a = cluster.replicas.find((r) => r !== b)!;
  t.equal(b.name, 'cp2', 'the link is on cp2, which runs no matcher');
  const onA = customer.via(a.url);
  const { created } = await onA.createFundedJob(busyboxSpec(market.images, 'echo from-a; echo result > /output/result.txt'));
  const job = await onA.waitForStatus(created.job.id, ['COMPLETED']);
  t.equal(job.assignment?.exitCode, 0, 'the container ran and exited 0');
  t.equal(job.assignment?.farm.slug, FARM);
  const { lines } = await onA.tailLogs(job.id);
  t.same(linesOf(lines, 'stdout').map((l) => l.line), ['from-a']);
  t.same(await runsOf(job), { assignments: 1, completions: 1 }, 'one assignment, one completion');
  t.equal((await linkHolder('the link to stay')).name, b.name, `the link stayed on ${b.name} while ${a.name} took the job`);
  finished.push(job);
});

t.test('behavior: outputs uploaded through one replica download through the other from a presigned S3 GET, and a corrupted object is integrity_error', async (t) => {
  const job = finished[0];
  if (!job) return t.fail('no finished job (the case above failed)');
  const output = job.artifacts.find((a) => a.id === job.result?.outputArtifactId)!;
  t.ok(output, 'an output artifact');
  for (const replica of cluster.replicas) {
    const download = await customer.via(replica.url).download(output.id);
    t.ok(download.location.startsWith(`${cluster.s3.endpoint}/${cluster.s3.bucket}/`), `${replica.name} redirects to the bucket`);
    t.equal(download.sha256, output.sha256, `the bytes through ${replica.name}'s presigned URL have the recorded SHA-256`);
  }

  const out = mkdtempSync(join(tmpdir(), 'gf-e2e-replicas-dl-'));
  t.teardown(() => rmSync(out, { recursive: true, force: true }));
  const dest = join(out, 'output.tar');
  for (const replica of cluster.replicas) {
    const gf = createClient({ baseUrl: replica.url, apiKey: customer.apiKey });
    const result = await gf.downloadArtifact(output.id, dest, { expectedSha256: output.sha256 });
    t.equal(result.sha256, output.sha256, `the SDK verified the download through ${replica.name}`);
    rmSync(dest);
  }

  const onDisk = s3rverObjectPath(cluster.s3, `${S3_BLOB_PREFIX}${output.sha256}`);
  const bytes = readFileSync(onDisk);
  const flipped = Buffer.from(bytes);
  flipped[0] = flipped[0]! ^ 0xff;
  writeFileSync(onDisk, flipped);
  t.teardown(() => writeFileSync(onDisk, bytes));
  const gf = createClient({ baseUrl: cluster.replicas[1]!.url, apiKey: customer.apiKey });
  const refused = await gf.downloadArtifact(output.id, dest).then(
    () => null,
    (err: unknown) => err,
  );
  t.ok(refused instanceof GfError, 'the download failed');
  t.equal((refused as GfError).code, 'integrity_error');
  t.ok((refused as GfError).details.some((d) => d.message.includes(createHash('sha256').update(flipped).digest('hex'))), 'details name the hash that arrived');
  t.notOk(existsSync(dest), 'nothing at the destination');
});

t.test('behavior: the replica holding the link is killed mid-job: the agent links to the other through HAProxy, the job runs once, each log line is stored once and the escrow settles', async (t) => {
  const LINES = 300;
  const holder = await linkHolder('the agent to hold one link');
  const survivor = cluster.replicas.find((r) => r !== holder)!;
  const { created } = await customer.createFundedJob(busyboxSpec(market.images, `${numberedLines(LINES, 30_000)}; echo done > /output/result.txt`));
  const id = created.job.id;
  await until(
    async () => {
      const res = await customer.request<{ data: unknown[] }>('GET', `/v1/jobs/${id}/logs?cursor=0&limit=1000`);
      return res.status === 200 && res.body.data.length >= 60;
    },
    'the job to have logged 60 lines',
    { timeoutMs: 120_000, intervalMs: 100, describe: () => market.diagnostics(10) },
  );
  t.equal((await customer.getJob(id)).status, 'RUNNING', 'mid-job');

  const upBefore = linksUp(agent);
  const killedAt = performance.now();
  await holder.process.kill();
  const linkedAgain = await until(() => linksUp(agent) > upBefore && performance.now(), 'the agent to link again', { timeoutMs: 60_000, intervalMs: 20, describe: () => market.diagnostics(10) });
  t.equal((await linkHolder('the new link')).name, survivor.name, `the link is on ${survivor.name}`);
  t.comment(`failover: the agent linked again ${((linkedAgain - killedAt) / 1000).toFixed(2)} s after ${holder.name} was killed (npm run bench measures it)`);

  const { lines, jobStatus } = await customer.tailLogs(id);
  t.equal(jobStatus, 'COMPLETED');
  t.same(linesOf(lines, 'stdout').map((l) => l.line), expected('out', LINES), 'every stdout line once, in order');
  t.same(outputOf(lines, 'stderr').map((l) => l.line), expected('err', LINES), 'every stderr line once, in order');
  const ids = lines.map((l) => l.id);
  t.equal(new Set(ids).size, ids.length, 'no line id twice');
  const job = await customer.getJob(id);
  t.equal(job.assignment?.exitCode, 0);
  t.equal(job.result?.hashesMatch, true, 'the outputs were stored and re-hashed');
  t.same(await runsOf(job), { assignments: 1, completions: 1 }, 'one assignment, one completion');
  await expectPaidOnRelease(t, market, customer, job, PAYOUT);
});
