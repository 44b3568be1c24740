import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { enrollAgent } from './helpers/agent.js';
import { Customer, linesOf } from './helpers/customer.js';
import { expectPaidOnRelease } from './helpers/escrow.js';
import { busyboxSpec } from './helpers/jobs.js';
import { Marketplace } from './helpers/marketplace.js';

/**
 * End to end, separate processes (control plane, chain, the real agent as root, real
 * containers): a customer's job that tries to read its host through its output rules, with
 * symlinks at every depth of the rules' paths into the agent's own state folder (machine token,
 * machine key), a secret file of the host and `/proc/self`, and a FIFO. None of it reaches a
 * stored artifact, the agent's state stays as it was, and since the broken rules are the job's
 * own doing the job completes and is billed once, never retried and refunded.
 */

// Separate processes, real containers and a chain: minutes, not the default two.
t.setTimeout(300_000);

const FARM = 'e2e-output-escape';
const PAYOUT = privateKeyToAddress(generatePrivateKey());
const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

const market = await Marketplace.start(t);
const agent = await enrollAgent(market, { name: 'agent', farm: FARM, payout: PAYOUT, priceUsd: '0.60' });
agent.start();
await market.waitForCapacity(FARM, 1);
const customer = await Customer.create(market, 1);

t.test("behavior: a job's symlinks out of its output read nothing of the host; the job completes, billed once, with lines saying which outputs were not stored and why", async (t) => {
  const secretDir = mkdtempSync(join(tmpdir(), 'gf-host-secret-'));
  t.teardown(() => rmSync(secretDir, { recursive: true, force: true }));
  chmodSync(secretDir, 0o755);
  const secret = Buffer.from(`host-secret-${randomBytes(24).toString('hex')}\n`);
  writeFileSync(join(secretDir, 'secret.txt'), secret, { mode: 0o644 });
  const state = ['machine.json', 'machine-key.pem'].map((n) => join(agent.stateDir, n));
  const stateBefore = state.map((f) => sha256(readFileSync(f)));
  const token = Buffer.from((JSON.parse(readFileSync(state[0]!, 'utf8')) as { machineToken: string }).machineToken);

  const rules = [
    { path: '/output', maxBytes: 1024 * 1024 },
    { path: `/output/x${agent.stateDir}`, maxBytes: 1024 * 1024 },
    { path: '/output/a/b/machine.json', maxBytes: 1024 * 1024 },
    { path: '/output/self/environ', maxBytes: 1024 * 1024 },
    { path: `/output/x${secretDir}/secret.txt`, maxBytes: 1024 * 1024 },
  ];
  const script = [
    'ln -s / /output/x',
    'mkdir -p /output/a',
    `ln -s ${agent.stateDir} /output/a/b`,
    `ln -s ${agent.stateDir}/machine-key.pem /output/key`,
    'ln -s /proc/self /output/self',
    'mkfifo /output/fifo',
    'echo mine > /output/ok.txt',
  ].join('; ');
  const { created } = await customer.createFundedJob(busyboxSpec(market.images, script, { title: 'reads its host through symlinks', outputRules: rules }));
  const { lines, jobStatus } = await customer.tailLogs(created.job.id);
  t.equal(jobStatus, 'COMPLETED', 'completed: the broken rules are the job\'s own doing');

  const system = linesOf(lines, 'system').map((l) => l.line);
  const unpackable = (i: number, through: string) =>
    `output ${rules[i]!.path} could not be packed from the job's own files (${through} is a symbolic link; the path of an output rule (${rules[i]!.path}) is never resolved through one): not stored; the job is billed for the time it ran`;
  for (const [i, through] of [[1, '/output/x'], [2, '/output/a/b'], [3, '/output/self'], [4, '/output/x']] as const) {
    t.ok(system.includes(unpackable(i, through)), `a system line says why output ${rules[i]!.path} is not stored`);
  }
  t.ok(system.includes('output /output: left out /output/fifo (a FIFO): only regular files, folders and symlinks are archived, and nothing else is opened'), `a system line names the FIFO left out: ${JSON.stringify(system)}`);
  t.equal(system.filter((l) => l.startsWith('matched:')).length, 1, 'matched once: never retried');
  const [runs] = await market.query<{ n: number }>('SELECT count(*)::int AS n FROM assignments WHERE job_id = $1', [created.job.id]);
  t.equal(runs!.n, 1, 'one assignment');

  const job = await customer.getJob(created.job.id);
  t.ok(job.cost && job.cost.totalMicroUsd > 0, 'billed for the time it ran');
  t.match(job.receipt?.status, /^(completed|released)$/, 'the completion is on chain');
  t.same(job.artifacts.map((a) => a.kind).sort(), ['log', 'output'], 'stored: the whole output and the log, nothing for the rules through symlinks');
  for (const artifact of job.artifacts) {
    const { bytes } = await customer.download(artifact.id);
    t.notOk(bytes.includes(secret), `${artifact.filename}: no byte of the host's secret file`);
    t.notOk(bytes.includes(token), `${artifact.filename}: no byte of the machine token`);
  }
  t.same(state.map((f) => sha256(readFileSync(f))), stateBefore, "the agent's machine.json and machine-key.pem are as they were");
  await expectPaidOnRelease(t, market, customer, job, PAYOUT);
});
