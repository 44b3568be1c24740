import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { createPublicClient, createWalletClient, http } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { createClient, GfError, type JobSpec, type FollowLogsEnd, type FundStep } from '@gpufarm/client';
import { formatMicroUsd, GpufarmError, type JobStatus } from '@gpufarm/shared';
import { canaryResult } from '@gpufarm/shared/node';
import { chainFor } from '@gpufarm/control-plane/chain';
import { readLiveLocalState } from '@gpufarm/control-plane/local-state';
import { chainFile, LOCAL_CUSTOMER } from './chain/local-chain.js';
import { scriptsEnv, ScriptsEnvError, type ScriptsEnv } from './env.js';
import { readLocalImages } from './local-agent.js';

const USAGE = `usage: npm run demo [-- --token stable|eth] [--iterations N] [--wait-release]

Runs the service's canary job against the marketplace \`npm start\` runs, as a customer would:
an API key for the local customer wallet, the job, its funding from that wallet, the logs,
the result, the download checked against its SHA-256, and the escrow receipt.
  --token          the payment token (default stable: tUSDC; eth: native ETH)
  --iterations     sha256-chain iterations (default 100000)
  --wait-release   wait for the escrow's release after the challenge window and show the split`;

/** A problem the user can act on: printed as is, exit code 1. */
class DemoError extends GpufarmError<'demo_failed'> {
  constructor(message: string) {
    super('demo_failed', message);
  }
}

const isTty = process.stdout.isTTY === true;
let stepNumber = 0;
const step = (title: string) => console.log(`\n${++stepNumber}. ${title}`);
const info = (line: string) => console.log(`   ${line}`);

/** One line that redraws itself on a terminal while something is awaited; nothing elsewhere. */
class Progress {
  private frame = 0;
  private shown = false;
  private readonly started = Date.now();
  update(text: string): void {
    if (!isTty) return;
    const frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
    const seconds = Math.round((Date.now() - this.started) / 1000);
    process.stdout.write(`\r\x1b[2K   ${frames[this.frame++ % frames.length]} ${text} (${seconds} s)`);
    this.shown = true;
  }
  clear(): void {
    if (this.shown) process.stdout.write('\r\x1b[2K');
    this.shown = false;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What to do next when an SDK call fails, by its code; the SDK's own message says what happened. */
function nextStep(err: GfError, url: string): string {
  switch (err.code) {
    case 'network_error':
    case 'timeout':
      return `is npm start still running at ${url}?`;
    case 'wallet_mismatch':
      return 'unset GF_API_KEY or use a key of the demo wallet.';
    case 'integrity_error':
      return 'the download does not match its recorded hash: nothing was saved; do not use any copy of it.';
    case 'wrong_chain':
      return 'npm run demo needs the chain npm start runs (unset GF_RPC_URL and GF_CHAIN_ID).';
    default:
      return 'check the message above.';
  }
}

/** Runs one SDK call, turning its failure into a DemoError that names the step and what to do. */
async function attempt<T>(what: string, url: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (!(err instanceof GfError)) throw err;
    throw new DemoError(`${what} failed: ${err.code}: ${err.message}${err.requestId ? ` (request ${err.requestId})` : ''}\n${nextStep(err, url)}`);
  }
}

/** The running local marketplace: its URL and admin token (state file) and the local chain (chain file). */
function findMarketplace(dataDir: string, given: ScriptsEnv): { url: string; adminToken: string | null; rpcUrl: string; chainId: number } {
  const state = readLiveLocalState(dataDir);
  const url = given.GF_ENDPOINT ?? state?.url;
  if (!url) throw new DemoError(`no running marketplace found (${join(dataDir, 'control-plane.json')}): start it with \`npm start\` in another terminal and wait for "gpufarm is running", then run npm run demo again.`);
  const file = chainFile(dataDir);
  if (!existsSync(file) && !given.GF_RPC_URL) throw new DemoError(`no local chain found (${file}): npm run demo needs the chain npm start runs (without GF_RPC_URL).`);
  const saved = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as { rpcUrl: string; chainId: number }) : null;
  return { url, adminToken: given.GF_ADMIN_TOKEN ?? state?.adminToken ?? null, rpcUrl: given.GF_RPC_URL ?? saved!.rpcUrl, chainId: Number(given.GF_CHAIN_ID ?? saved?.chainId ?? 4663) };
}

async function apiKeyFor(url: string, adminToken: string | null, apiKey: string | undefined): Promise<string> {
  if (apiKey) {
    info('using GF_API_KEY');
    return apiKey;
  }
  if (!adminToken) throw new DemoError('the running control plane has no admin API token; restart it with npm start, or set GF_API_KEY to a key of the customer wallet.');
  const res = await fetch(`${url}/admin/v1/api-keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ walletAddress: LOCAL_CUSTOMER.address, scopes: ['jobs:create', 'jobs:read', 'artifacts:read', 'billing:read'], label: 'npm run demo' }),
  });
  const body = (await res.json()) as { key?: string; accountId?: string; error?: { message: string } };
  if (res.status !== 201 || !body.key) throw new DemoError(`creating an API key failed (HTTP ${res.status}: ${body.error?.message ?? JSON.stringify(body)}); is this the control plane npm start runs?`);
  info(`account ${body.accountId}, wallet ${LOCAL_CUSTOMER.address} (anvil dev account 1)`);
  info(`key ${body.key.slice(0, 16)}… (scopes jobs:create, jobs:read, artifacts:read, billing:read)`);
  return body.key;
}

const usd = (microUsd: number) => `${formatMicroUsd(microUsd)} USD`;
const tokenAmount = (amount: string, decimals: number, symbol: string) => {
  const value = BigInt(amount);
  const unit = 10n ** BigInt(decimals);
  const fraction = (value % unit).toString().padStart(decimals, '0').replace(/0+$/, '');
  return `${value / unit}${fraction ? `.${fraction}` : ''} ${symbol}`;
};

async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({ args: argv, options: { token: { type: 'string', default: 'stable' }, iterations: { type: 'string', default: '100000' }, 'wait-release': { type: 'boolean', default: false }, help: { type: 'boolean', default: false } }, strict: true });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const paymentToken = values.token;
  if (paymentToken !== 'stable' && paymentToken !== 'eth') throw new DemoError(`--token must be stable or eth, got ${paymentToken}`);
  const iterations = Number(values.iterations);
  if (!Number.isSafeInteger(iterations) || iterations < 1 || iterations > 100_000_000) throw new DemoError('--iterations must be a whole number from 1 to 100000000');
  const given = scriptsEnv();
  const dataDir = given.GF_DATA_DIR ?? '.gpufarm';

  step('Find the running marketplace');
  const market = findMarketplace(dataDir, given);
  info(`control plane ${market.url}, chain ${market.chainId} at ${market.rpcUrl}`);
  const canary = given.GF_CANARY_IMAGE ?? readLocalImages()?.images.canary.reference;
  if (!canary) throw new DemoError('no canary image: .gpufarm/images.json is missing. Restart npm start: it prepares Docker, the local registry and the images, or says what to install.');
  const capacity = await attempt('GET /v1/capacity', market.url, () => createClient({ baseUrl: market.url }).capacity.list({ farm: 'local' }));
  const offer = capacity.data[0];
  if (offer) info(`local farm: ${offer.count}x ${offer.gpu.label} in ${offer.region.key}${offer.simulated ? ' (simulated)' : ''}, ${offer.available} available, ${usd(offer.price.perGpuHourMicroUsd)} per GPU-hour`);
  else info('the local farm offers nothing yet (no local agent online?): the job will wait QUEUED until a machine fits');

  step('Create an API key for the customer wallet');
  const gf = createClient({ baseUrl: market.url, apiKey: await apiKeyFor(market.url, market.adminToken, given.GF_API_KEY) });

  step(`Create the canary job (sha256-chain ${iterations}, paid in ${paymentToken === 'eth' ? 'ETH' : 'tUSDC'})`);
  const spec = { title: 'npm run demo: canary', image: canary, command: ['sha256-chain', String(iterations)], workloadType: 'batch', gpu: { count: 1 }, maxRuntimeSeconds: 600, maxPricePerGpuHour: '2.00', paymentToken, deterministic: true } satisfies JobSpec;
  info(`POST /v1/jobs ${JSON.stringify({ image: spec.image.replace(/@sha256:(.{12}).*/, '@sha256:$1…'), command: spec.command, gpu: spec.gpu, paymentToken })}`);
  const created = await attempt('creating the job', market.url, () => gf.jobs.create(spec));
  const job = created.job;
  info(`job ${job.id}: ${job.status}, at most ${usd(job.pricing.maxCostMicroUsd)} = ${tokenAmount(job.payment.maxPayment, job.payment.decimals, job.payment.symbol)} held in escrow`);
  const funding = created.funding;
  if (!funding) throw new DemoError(`the job cannot be funded: ${JSON.stringify(created.fundingUnavailable)}. Is the local chain running (npm start prints its RPC URL)?`);

  step(`Fund it from the wallet (${funding.calls.length} transaction${funding.calls.length === 1 ? '' : 's'})`);
  const chain = chainFor(market.chainId, market.rpcUrl);
  const publicClient = createPublicClient({ chain, transport: http(market.rpcUrl), pollingInterval: 250 });
  const wallet = createWalletClient({ chain, transport: http(market.rpcUrl), account: privateKeyToAccount(LOCAL_CUSTOMER.privateKey) });
  let confirmStep = false;
  const onStep = (s: FundStep) => {
    if (s.kind === 'skipped') info(`${s.call.title}: skipped, the allowance (${s.allowance}) already covers it`);
    if (s.kind === 'mined') info(`${s.call.title}: ${s.hash} (block ${s.blockNumber}, success)`);
    if ((s.kind === 'pending' || s.kind === 'confirmed') && !confirmStep) {
      confirmStep = true;
      step('Confirm the funding (the service reads the JobFunded event from the chain)');
    }
    if (s.kind === 'pending') info(`not confirmed yet (202, ${s.answer.confirmations} of ${s.answer.requiredConfirmations} confirmations); again in ${(s.retryInMs / 1000).toFixed(1)} s`);
  };
  const confirmed = await attempt('funding the job', market.url, () => gf.fundJob(job, wallet, { publicClient, onStep }));
  info(`${confirmed.status}: job ${confirmed.job.status}`);

  step('Tail the logs until the job ends');
  const progress = new Progress();
  let status: JobStatus = confirmed.job.status;
  const started = Date.now();
  const stop = new AbortController();
  let following = true;
  // The job's status, for the progress line and the stuck-in-QUEUED check; the logs come from the stream.
  const waiting = gf.waitForJob(job.id, {
    signal: stop.signal,
    initialIntervalMs: 1_000,
    maxIntervalMs: 2_000,
    onPoll: (j) => {
      if (j.status !== status && !isTty && following) info(`(job ${j.status})`);
      status = j.status;
      if (status === 'QUEUED' && Date.now() - started > 120_000 && !offer) {
        stop.abort(new DemoError(`job ${job.id} is still QUEUED after 2 minutes and the local farm offers no GPU: is the local agent running (npm start's banner says so)? The job stays funded; cancel it with POST /v1/jobs/${job.id}/cancel.`));
      }
    },
  });
  // Awaited once the logs end; a failure before then also stops the follow through `stop`.
  waiting.catch((err: unknown) => stop.abort(err));
  const ticker = isTty ? setInterval(() => progress.update(`job ${status}${status === 'QUEUED' ? ': waiting for a machine' : ''}`), 100) : undefined;
  let ended: FollowLogsEnd;
  try {
    const follow = gf.followLogs(job.id, { signal: stop.signal });
    for (;;) {
      const next = await attempt('following the logs', market.url, () => follow.next());
      if (next.done) {
        ended = next.value;
        break;
      }
      progress.clear();
      info(`[${next.value.stream}] ${next.value.line}`);
    }
  } finally {
    following = false;
    clearInterval(ticker);
    progress.clear();
  }
  info(`job ${ended.jobStatus}`);

  step('Read the job');
  const done = await attempt('reading the job', market.url, () => waiting);
  const a = done.assignment;
  if (a) info(`ran on ${a.gpu.count}x ${a.gpu.model} at farm ${a.farm.name} (${a.region}), exit code ${a.exitCode}, ${a.startedAt} to ${a.finishedAt}`);
  info(`verification level: ${done.verificationLevel ?? 'none'}`);
  if (done.cost) info(`cost: ${done.cost.billableGpuSeconds} GPU-seconds, compute ${usd(done.cost.computeMicroUsd)} + fee ${usd(done.cost.feeMicroUsd)} = ${usd(done.cost.totalMicroUsd)} (${tokenAmount(done.cost.finalPayment, done.payment.decimals, done.payment.symbol)})`);
  if (done.status !== 'COMPLETED') throw new DemoError(`the job ended ${done.status}: see its system log lines above.`);
  const result = done.result;
  if (!result?.outputArtifactId) throw new DemoError('the job has no output artifact; see its system log lines above.');
  info(`result: host hash ${result.hostHash}, server hash ${result.serverHash}, ${result.hashesMatch ? 'they match' : 'THEY DIFFER'}`);

  step('Download the output and check its SHA-256');
  const outputId = result.outputArtifactId;
  const folder = resolve(dataDir, 'demo');
  mkdirSync(folder, { recursive: true });
  const file = join(folder, `${done.id}-output.tar`);
  info('GET /v1/artifacts/:id answers a 302 to a signed URL (valid 120 s) with X-Artifact-Sha256 and X-Artifact-Size');
  const saved = await attempt('downloading the output', market.url, () => gf.downloadArtifact(outputId, file, { expectedSha256: result.serverHash }));
  const shown = relative(process.cwd(), saved.path);
  info(`${saved.sizeBytes} bytes saved to ${shown.startsWith('..') || isAbsolute(shown) ? saved.path : shown}`);
  info(`SHA-256 of the bytes   ${saved.sha256}`);
  info("equals X-Artifact-Sha256 and the job's result.serverHash: intact");
  try {
    const text = (await promisify(execFile)('tar', ['-xOf', file, 'result.txt'])).stdout;
    const expected = canaryResult(done.id, iterations);
    info(`result.txt ${text.trim().slice(0, 16)}…: ${text === expected ? 'equals sha256^n(job id) computed here' : 'DIFFERS from sha256^n(job id) computed here'}`);
  } catch {
    info('(result.txt not read: no tar on this machine or another layout)');
  }

  step('The escrow receipt');
  const receipt = done.receipt;
  if (!receipt) throw new DemoError('the job has no receipt yet; read it later with GET /v1/jobs/' + done.id);
  info(`job key ${receipt.jobKey}: ${receipt.status}, ${tokenAmount(receipt.amount, done.payment.decimals, done.payment.symbol)} for ${receipt.computeSeconds} s`);
  info(`funding tx    ${receipt.transactions.fund}`);
  info(`completion tx ${receipt.transactions.completion}`);
  info(`challenge window ends ${receipt.challengeEndsAt}; then the escrow releases the payment (provider, fee, the rest back to the wallet)`);
  if (values['wait-release']) {
    const waiting = new Progress();
    let released = done;
    const deadline = Date.parse(receipt.challengeEndsAt ?? new Date().toISOString()) + 120_000;
    while (released.receipt?.status !== 'released') {
      if (Date.now() > deadline) {
        waiting.clear();
        throw new DemoError(`no release two minutes after the window ended (receipt ${released.receipt?.status}); is npm start (its escrow worker) still running?`);
      }
      waiting.update(`waiting for the release (window ends ${receipt.challengeEndsAt})`);
      await sleep(1000);
      released = await attempt('reading the job', market.url, () => gf.jobs.get(job.id));
    }
    waiting.clear();
    info(`released: ${released.receipt!.transactions.release}`);
  }
  console.log(`\nDone: job ${done.id} ${done.status}, ${done.verificationLevel}, ${done.cost ? usd(done.cost.totalMicroUsd) : 'no cost'}.`);
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof DemoError || err instanceof ScriptsEnvError) console.error(`\nnpm run demo: ${err.message}`);
  else if (err instanceof GfError) console.error(`\nnpm run demo: ${err.code}: ${err.message}`);
  else if (err instanceof TypeError && 'code' in err && String(err.code).startsWith('ERR_PARSE_ARGS')) console.error(`npm run demo: ${err.message}\n\n${USAGE}`);
  else console.error(`\nnpm run demo failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
  process.exit(1);
});
