import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { stringify } from 'yaml';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { ANVIL_ACCOUNTS } from '@gpufarm/control-plane/testing';
import { jobListSchema, jobSchema, fundConfirmResponseSchema, jobCreatedSchema, logListSchema } from '@gpufarm/shared';
import { spawn } from 'node:child_process';
import { gf, gfCommandLine, gfHome } from '@gpufarm/client/testing/gf';
import { enrollAgent } from './helpers/agent.js';
import { busyboxSpec, canarySpec } from './helpers/jobs.js';
import { Marketplace } from './helpers/marketplace.js';

/**
 * The `gf` CLI as a customer runs it, as a child process against separate processes: the
 * control plane, anvil, one real agent with a simulated GPU, dockerd and the local registry.
 */

t.setTimeout(300_000);

const FARM = 'e2e-cli';
const market = await Marketplace.start(t, { challengeWindowSeconds: 8 });
const agent = await enrollAgent(market, { name: 'agent', farm: FARM, payout: privateKeyToAddress(generatePrivateKey()), priceUsd: '0.50', gpus: '1x rtx-4090-24gb' });
agent.start();
await market.waitForCapacity(FARM, 1);
const CUSTOMER = ANVIL_ACCOUNTS[1];
const apiKey = await market.createApiKey(CUSTOMER.address);

const work = mkdtempSync(join(tmpdir(), 'gf-e2e-cli-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));
const jobFile = join(work, 'canary.yaml');
writeFileSync(jobFile, stringify(canarySpec(market.images, 'stable', 50_000)));

/** The environment of a customer logged in to this marketplace, funding with `walletKey`. */
function customerEnv(home: { env: Record<string, string> }, walletKey: string = CUSTOMER.privateKey): Record<string, string> {
  return { ...home.env, GF_ENDPOINT: market.url, GF_API_KEY: apiKey, GF_RPC_URL: market.anvil.rpcUrl, GF_WALLET_KEY: walletKey };
}

t.test('behavior: gf run --fund --follow --download --json runs the canary end to end; stdout is one JSON document and the exit code is 0', async (t) => {
  const home = gfHome(t);
  const out = join(work, 'out');
  const r = await gf(['run', '-f', jobFile, '--fund', '--follow', '--download', out, '--json'], { env: customerEnv(home) });
  t.equal(r.code, 0, `gf run exits 0 for a COMPLETED job (stderr: ${r.stderr.slice(-2000)})`);
  const report = JSON.parse(r.stdout) as { object: string; created: unknown; funding: unknown; job: unknown; downloads: { path: string; sha256: string; sizeBytes: number }[] };
  t.equal(report.object, 'gf.run');
  const created = jobCreatedSchema.parse(report.created);
  const confirmation = fundConfirmResponseSchema.parse(report.funding);
  const job = jobSchema.parse(report.job);
  t.equal(confirmation.job.status, 'QUEUED', 'the funding was confirmed');
  t.equal(job.id, created.job.id);
  t.equal(job.status, 'COMPLETED');
  t.equal(job.verificationLevel, 'RESULT_VERIFIED');
  t.equal(job.result?.hashesMatch, true);
  t.notMatch(r.stdout + r.stderr, CUSTOMER.privateKey.slice(2), 'the wallet key is never printed');
  t.notMatch(r.stdout + r.stderr, apiKey, 'nor the API key');

  t.equal(report.downloads.length, job.artifacts.length, 'every artifact downloaded');
  const output = job.artifacts.find((a) => a.id === job.result?.outputArtifactId)!;
  const written = report.downloads.find((d) => d.path === join(out, output.filename))!;
  t.equal(written.sha256, job.result?.serverHash, "the output's verified hash is the job's result hash");
  t.equal(createHash('sha256').update(readFileSync(written.path)).digest('hex'), job.result?.serverHash, 'the file on disk has those bytes');

  const logs = await gf(['logs', job.id, '--stream', 'stdout'], { env: customerEnv(home) });
  t.equal(logs.code, 0, logs.stderr);
  t.ok(logs.stdout.trim().length > 0, 'gf logs prints the job’s stdout lines');
  const followed = await gf(['logs', job.id, '-f', '--json'], { env: customerEnv(home) });
  t.equal(followed.code, 0, followed.stderr);
  const lines = followed.stdout.trim().split('\n').map((l) => JSON.parse(l) as { id: number; stream: string });
  t.ok(lines.length > 0 && lines.every((l, i) => i === 0 || l.id > lines[i - 1]!.id), 'logs -f --json is one log line per output line, in order, ending with the job');
  const page = logListSchema.parse(JSON.parse((await gf(['logs', job.id, '--json'], { env: customerEnv(home) })).stdout));
  t.same(page.data.map((l) => l.id), lines.map((l) => l.id), 'logs --json is one log list object holding every line');
  t.equal(page.jobStatus, 'COMPLETED');
  const since = await gf(['logs', job.id, '--json', '--since', String(lines.at(-2)!.id)], { env: customerEnv(home) });
  t.same(logListSchema.parse(JSON.parse(since.stdout)).data.map((l) => l.id), [lines.at(-1)!.id], '--since starts after the cursor');

  const listed = await gf(['jobs', 'list', '--json', '--status', 'COMPLETED'], { env: customerEnv(home) });
  t.ok(jobListSchema.parse(JSON.parse(listed.stdout)).data.some((j) => j.id === job.id));
  const billing = await gf(['billing'], { env: customerEnv(home) });
  t.match(billing.stdout, /funded/);
});

t.test('error: a wallet that is not the key owner’s, or a key file others can read, exits 5 before anything is sent', async (t) => {
  const home = gfHome(t);
  const other = ANVIL_ACCOUNTS[2];
  const nonceBefore = await market.publicClient.getTransactionCount({ address: other.address });
  const mismatch = await gf(['run', '-f', jobFile, '--fund', '--json'], { env: customerEnv(home, other.privateKey) });
  t.equal(mismatch.code, 5, 'wallet_mismatch exits 5');
  t.match(mismatch.stderr, /gf: wallet_mismatch: /);
  t.match(mismatch.stderr, /next: Fund from the wallet of the account that owns the API key/);
  t.equal(mismatch.stdout, '', 'nothing on stdout');
  t.equal(await market.publicClient.getTransactionCount({ address: other.address }), nonceBefore, 'no transaction was sent');

  const rpcDown = await gf(['run', '-f', jobFile, '--fund', '--rpc-url', 'http://127.0.0.1:9'], { env: customerEnv(home) });
  t.equal(rpcDown.code, 5, 'a chain RPC that does not answer exits 5');
  t.match(rpcDown.stderr, /gf: wallet: Funding job job_\w+ failed on the chain: The wallet's chain did not answer its chain id/);
  t.match(rpcDown.stderr, /next: Check the wallet's balance and the RPC \(http:\/\/127\.0\.0\.1:9\), then run gf jobs fund job_\w+\./);

  const keyFile = join(work, 'wallet.key');
  writeFileSync(keyFile, `${CUSTOMER.privateKey}\n`, { mode: 0o644 });
  const jobsBefore = JSON.parse((await gf(['jobs', 'list', '--json', '--all'], { env: customerEnv(home) })).stdout) as unknown[];
  const env = customerEnv(home);
  delete env.GF_WALLET_KEY;
  const open = await gf(['run', '-f', jobFile, '--fund', '--wallet-key-file', keyFile], { env });
  t.equal(open.code, 5, 'a key file readable by others exits 5');
  t.match(open.stderr, /readable by others \(mode 0644\); refusing to use it/);
  t.match(open.stderr, `next: Run: chmod 600 ${keyFile}`);
  t.notMatch(open.stderr, CUSTOMER.privateKey.slice(2), 'the key is not printed');
  const jobsAfter = JSON.parse((await gf(['jobs', 'list', '--json', '--all'], { env })).stdout) as unknown[];
  t.equal(jobsAfter.length, jobsBefore.length, 'no job was created');
  t.ok(existsSync(keyFile));
});

t.test('behavior: gf run without --fund, then gf jobs fund with a 0600 key file and gf jobs wait; a program exiting non-zero makes gf run exit 1', async (t) => {
  const home = gfHome(t);
  const env = customerEnv(home);
  delete env.GF_WALLET_KEY;
  const created = await gf(['run', '-f', jobFile, '--json'], { env });
  t.equal(created.code, 0, created.stderr);
  const job = jobCreatedSchema.parse(JSON.parse(created.stdout)).job;
  t.equal(job.status, 'CREATED', 'without --fund the job is only created');
  const human = await gf(['run', '-f', jobFile], { env });
  t.match(human.stdout, /Fund it from 0x[0-9a-fA-F]{40} with:\n {2}.+\n[\s\S]*or run: gf jobs fund job_/);

  const keyFile = join(work, 'owner.key');
  writeFileSync(keyFile, `${CUSTOMER.privateKey}\n`);
  chmodSync(keyFile, 0o600);
  const funded = await gf(['jobs', 'fund', job.id, '--wallet-key-file', keyFile], { env });
  t.equal(funded.code, 0, funded.stderr);
  t.match(funded.stdout, `Job ${job.id} is funded and QUEUED.`);
  t.match(funded.stderr, /mined in block \d+/, 'each funding step is a plain line into a pipe');
  const waited = await gf(['jobs', 'wait', job.id, '--json'], { env });
  t.equal(waited.code, 0, waited.stderr);
  t.equal(jobSchema.parse(JSON.parse(waited.stdout)).status, 'COMPLETED');

  const failing = join(work, 'failing.json');
  writeFileSync(failing, JSON.stringify(busyboxSpec(market.images, 'echo about to fail; exit 3')));
  const failed = await gf(['run', '-f', failing, '--fund', '--follow'], { env: customerEnv(home) });
  t.equal(failed.code, 1, 'a job whose program exited 3 makes gf run exit 1');
  t.match(failed.stdout, /^about to fail$/m, 'with --follow the job’s stdout lines reach stdout');
  t.match(failed.stdout, /status\s+COMPLETED/, 'the job itself COMPLETED (a non-zero exit is billed)');
  t.match(failed.stdout, /exit code\s+3/);
  t.match(failed.stderr, /\[system\] /, 'system lines go to stderr, marked');
});

t.test('behavior: Ctrl-C while gf run waits stops gf with 130 and says how to pick the job up; the job keeps running', async (t) => {
  const home = gfHome(t);
  const sleeper = join(work, 'sleeper.json');
  writeFileSync(sleeper, JSON.stringify(busyboxSpec(market.images, 'echo started; sleep 15')));
  const [node, ...argv] = gfCommandLine(['run', '-f', sleeper, '--fund', '--follow']);
  const child = spawn(node!, argv, { env: { ...process.env, ...customerEnv(home) }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const started = new Promise<void>((resolve) =>
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
      if (stdout.includes('started')) resolve();
    }),
  );
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  await Promise.race([started, exited]);
  child.kill('SIGINT');
  const code = await exited;
  t.equal(code, 130, `exit 130 (stderr: ${stderr.slice(-1000)})`);
  const jobId = /created job (job_\w+)/.exec(stderr)?.[1];
  t.ok(jobId, 'the job id was printed');
  t.match(stderr, `Stopped waiting; job ${jobId} keeps running. Pick it up with: gf logs -f ${jobId} or gf jobs wait ${jobId}`);
  const job = await gf(['jobs', 'get', jobId!, '--json'], { env: customerEnv(home) });
  // Ctrl-C stops gf, never the job: it is still running, or (on a busy machine, where gf's own
  // starts take seconds) it already finished its 15 s, but it was not cancelled.
  t.match(jobSchema.parse(JSON.parse(job.stdout)).status, /^(RUNNING|COMPLETED)$/, 'the job keeps running (not cancelled)');
  const waited = await gf(['jobs', 'wait', jobId!], { env: customerEnv(home) });
  t.equal(waited.code, 0, 'gf jobs wait picks it up to its end');
});
