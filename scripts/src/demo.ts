import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { createPublicClient, createWalletClient, http, type Hash, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { apiRequest, type HttpAnswer } from '@gpufarm/client';
import { canaryResult, formatMicroUsd, GpufarmError, isTerminalStatus, type Job, type JobStatus, type LogLine } from '@gpufarm/shared';
import { chainFor } from '@gpufarm/control-plane/chain/client.js';
import { readLiveLocalState } from '@gpufarm/control-plane/local-state.js';
import { chainFile, LOCAL_CUSTOMER } from './chain/local-chain.js';
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

interface Api {
  url: string;
  key: string;
}

async function call<T>(api: Api, method: string, path: string, body?: unknown): Promise<HttpAnswer<T>> {
  try {
    return await apiRequest<T>(api.url, api.key, method, path, { body });
  } catch (err) {
    throw new DemoError(`${method} ${path}: the control plane at ${api.url} does not answer (${(err as Error).message}); is npm start still running?`);
  }
}

function apiError(what: string, res: { status: number; body: unknown }, next: string): DemoError {
  const error = (res.body as { error?: { code: string; message: string } } | null)?.error;
  return new DemoError(`${what} failed: HTTP ${res.status}${error ? ` ${error.code}: ${error.message}` : ` ${JSON.stringify(res.body).slice(0, 300)}`}\n${next}`);
}

/** The running local marketplace: its URL and admin token (state file) and the local chain (chain file). */
function findMarketplace(dataDir: string): { url: string; adminToken: string | null; rpcUrl: string; chainId: number } {
  const state = readLiveLocalState(dataDir);
  const url = process.env.GF_API_URL || state?.url;
  if (!url) throw new DemoError(`no running marketplace found (${join(dataDir, 'control-plane.json')}): start it with \`npm start\` in another terminal and wait for "gpufarm is running", then run npm run demo again.`);
  const file = chainFile(dataDir);
  if (!existsSync(file) && !process.env.GF_RPC_URL) throw new DemoError(`no local chain found (${file}): npm run demo needs the chain npm start runs (without GF_RPC_URL).`);
  const saved = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as { rpcUrl: string; chainId: number }) : null;
  return { url, adminToken: process.env.GF_ADMIN_TOKEN || state?.adminToken || null, rpcUrl: process.env.GF_RPC_URL || saved!.rpcUrl, chainId: Number(process.env.GF_CHAIN_ID || saved?.chainId || 4663) };
}

async function apiKeyFor(url: string, adminToken: string | null): Promise<string> {
  if (process.env.GF_API_KEY) {
    info('using GF_API_KEY');
    return process.env.GF_API_KEY;
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
  const dataDir = process.env.GF_DATA_DIR || '.gpufarm';

  step('Find the running marketplace');
  const market = findMarketplace(dataDir);
  info(`control plane ${market.url}, chain ${market.chainId} at ${market.rpcUrl}`);
  const canary = process.env.GF_CANARY_IMAGE || readLocalImages()?.images.canary.reference;
  if (!canary) throw new DemoError('no canary image: .gpufarm/images.json is missing. Run sudo bash scripts/test-env.sh (Docker, the local registry and the images), then restart npm start.');
  const capacity = await fetch(`${market.url}/v1/capacity?farm=local`).then((r) => r.json() as Promise<{ data?: { gpu: { label: string }; available: number; count: number; price: { perGpuHourMicroUsd: number }; region: { key: string }; simulated: boolean }[] }>);
  const offer = capacity.data?.[0];
  if (offer) info(`local farm: ${offer.count}x ${offer.gpu.label} in ${offer.region.key}${offer.simulated ? ' (simulated)' : ''}, ${offer.available} available, ${usd(offer.price.perGpuHourMicroUsd)} per GPU-hour`);
  else info('the local farm offers nothing yet (no local agent online?): the job will wait QUEUED until a machine fits');

  step('Create an API key for the customer wallet');
  const api: Api = { url: market.url, key: await apiKeyFor(market.url, market.adminToken) };

  step(`Create the canary job (sha256-chain ${iterations}, paid in ${paymentToken === 'eth' ? 'ETH' : 'tUSDC'})`);
  const spec = { title: 'npm run demo: canary', image: canary, command: ['sha256-chain', String(iterations)], workloadType: 'batch', gpu: { count: 1 }, maxRuntimeSeconds: 600, maxPricePerGpuHour: '2.00', paymentToken, deterministic: true };
  info(`POST /v1/jobs ${JSON.stringify({ image: spec.image.replace(/@sha256:(.{12}).*/, '@sha256:$1…'), command: spec.command, gpu: spec.gpu, paymentToken })}`);
  const created = await call<{ job: Job; funding: { signer: string; calls: { title: string; to: Hex; data: Hex; value: string }[] } | null; fundingUnavailable: { message?: string } | null }>(api, 'POST', '/v1/jobs', spec);
  if (created.status !== 201) throw apiError('creating the job', created, 'Check the message above; npm start prints the canary image it expects.');
  const job = created.body.job;
  info(`job ${job.id}: ${job.status}, at most ${usd(job.pricing.maxCostMicroUsd)} = ${tokenAmount(job.payment.maxPayment, job.payment.decimals, job.payment.symbol)} held in escrow`);
  const funding = created.body.funding;
  if (!funding) throw new DemoError(`the job cannot be funded: ${JSON.stringify(created.body.fundingUnavailable)}. Is the local chain running (npm start prints its RPC URL)?`);

  step(`Fund it from the wallet (${funding.calls.length} transaction${funding.calls.length === 1 ? '' : 's'})`);
  const chain = chainFor(market.chainId, market.rpcUrl);
  const publicClient = createPublicClient({ chain, transport: http(market.rpcUrl), pollingInterval: 250 });
  const wallet = createWalletClient({ chain, transport: http(market.rpcUrl), account: privateKeyToAccount(LOCAL_CUSTOMER.privateKey) });
  if (wallet.account.address.toLowerCase() !== funding.signer.toLowerCase()) throw new DemoError(`the funding calls must come from ${funding.signer}, not the demo wallet ${wallet.account.address}; unset GF_API_KEY or use a key of the demo wallet.`);
  let fundTx: Hash | null = null;
  for (const c of funding.calls) {
    try {
      fundTx = await wallet.sendTransaction({ to: c.to, data: c.data, value: BigInt(c.value) });
    } catch (err) {
      throw new DemoError(`sending "${c.title}" failed: ${(err as Error).message.split('\n')[0]}; is the chain at ${market.rpcUrl} running?`);
    }
    const receipt = await publicClient.waitForTransactionReceipt({ hash: fundTx });
    info(`${c.title}: ${fundTx} (block ${receipt.blockNumber}, ${receipt.status})`);
    if (receipt.status !== 'success') throw new DemoError(`"${c.title}" reverted; see the transaction ${fundTx}`);
  }

  step('Confirm the funding (the service reads the JobFunded event from the chain)');
  let confirmed: { status: number; headers: Headers; body: { status: string; message: string; job: Job } };
  for (;;) {
    confirmed = await call(api, 'POST', `/v1/jobs/${job.id}/fund-confirm`, { txHash: fundTx });
    if (confirmed.status !== 202) break;
    const wait = Number(confirmed.headers.get('retry-after') ?? '1');
    info(`not mined yet (202); again in ${wait} s`);
    await sleep(wait * 1000);
  }
  if (confirmed.status !== 200) throw apiError('fund-confirm', confirmed, `The funding transaction is ${fundTx}.`);
  info(`${confirmed.body.status}: job ${confirmed.body.job.status}`);

  step('Tail the logs until the job ends');
  const progress = new Progress();
  let cursor = '0';
  let status: JobStatus = confirmed.body.job.status;
  let lastStatus = status;
  const started = Date.now();
  for (;;) {
    const res = await call<{ jobStatus: JobStatus; nextCursor: string; data: LogLine[] }>(api, 'GET', `/v1/jobs/${job.id}/logs?cursor=${cursor}&limit=1000`);
    if (res.status !== 200) throw apiError('reading the logs', res, 'Try again; the job keeps running on its own.');
    if (res.body.data.length > 0) progress.clear();
    for (const line of res.body.data) info(`[${line.stream}] ${line.line}`);
    const moved = res.body.nextCursor !== cursor;
    cursor = res.body.nextCursor;
    status = res.body.jobStatus;
    if (status !== lastStatus && !isTty) info(`(job ${status})`);
    lastStatus = status;
    if (isTerminalStatus(status) && !moved) break;
    progress.update(`job ${status}${status === 'QUEUED' ? ': waiting for a machine' : ''}`);
    if (status === 'QUEUED' && Date.now() - started > 120_000 && !offer) {
      progress.clear();
      throw new DemoError(`job ${job.id} is still QUEUED after 2 minutes and the local farm offers no GPU: is the local agent running (npm start's banner says so)? The job stays funded; cancel it with POST /v1/jobs/${job.id}/cancel.`);
    }
    await sleep(moved ? 100 : 500);
  }
  progress.clear();
  info(`job ${status}`);

  step('Read the job');
  const done = (await call<Job>(api, 'GET', `/v1/jobs/${job.id}`)).body;
  const a = done.assignment;
  if (a) info(`ran on ${a.gpu.count}x ${a.gpu.model} at farm ${a.farm.name} (${a.region}), exit code ${a.exitCode}, ${a.startedAt} to ${a.finishedAt}`);
  info(`verification level: ${done.verificationLevel ?? 'none'}`);
  if (done.cost) info(`cost: ${done.cost.billableGpuSeconds} GPU-seconds, compute ${usd(done.cost.computeMicroUsd)} + fee ${usd(done.cost.feeMicroUsd)} = ${usd(done.cost.totalMicroUsd)} (${tokenAmount(done.cost.finalPayment, done.payment.decimals, done.payment.symbol)})`);
  if (done.status !== 'COMPLETED') throw new DemoError(`the job ended ${done.status}: see its system log lines above.`);
  const result = done.result;
  if (!result?.outputArtifactId) throw new DemoError('the job has no output artifact; see its system log lines above.');
  info(`result: host hash ${result.hostHash}, server hash ${result.serverHash}, ${result.hashesMatch ? 'they match' : 'THEY DIFFER'}`);

  step('Download the output and check its SHA-256');
  const redirect = await call(api, 'GET', `/v1/artifacts/${result.outputArtifactId}`);
  const location = redirect.headers.get('location');
  if (redirect.status !== 302 || !location) throw apiError('GET /v1/artifacts/:id', redirect, 'Expected a 302 to a signed URL.');
  const headerSha = redirect.headers.get('x-artifact-sha256');
  info(`302 to a signed URL (valid 120 s); X-Artifact-Sha256 ${headerSha}, X-Artifact-Size ${redirect.headers.get('x-artifact-size')}`);
  const download = await fetch(new URL(location, market.url));
  if (download.status !== 200) throw new DemoError(`the signed URL answered ${download.status}; run npm run demo again (the URL is valid 120 s).`);
  const bytes = Buffer.from(await download.arrayBuffer());
  const sha = createHash('sha256').update(bytes).digest('hex');
  const folder = resolve(dataDir, 'demo');
  mkdirSync(folder, { recursive: true });
  const file = join(folder, `${done.id}-output.tar`);
  writeFileSync(file, bytes);
  const shown = relative(process.cwd(), file);
  info(`${bytes.length} bytes saved to ${shown.startsWith('..') || isAbsolute(shown) ? file : shown}`);
  info(`SHA-256 of the bytes   ${sha}`);
  const matches = sha === headerSha && sha === result.serverHash;
  info(matches ? 'equals X-Artifact-Sha256 and the job\'s result.serverHash: intact' : `DOES NOT MATCH (header ${headerSha}, result ${result.serverHash})`);
  if (!matches) throw new DemoError('the download does not match its recorded hash (integrity_error); do not use it.');
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
      released = (await call<Job>(api, 'GET', `/v1/jobs/${job.id}`)).body;
    }
    waiting.clear();
    info(`released: ${released.receipt!.transactions.release}`);
  }
  console.log(`\nDone: job ${done.id} ${done.status}, ${done.verificationLevel}, ${done.cost ? usd(done.cost.totalMicroUsd) : 'no cost'}.`);
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof DemoError) console.error(`\nnpm run demo: ${err.message}`);
  else if (err instanceof TypeError && 'code' in err && String(err.code).startsWith('ERR_PARSE_ARGS')) console.error(`npm run demo: ${err.message}\n\n${USAGE}`);
  else console.error(`\nnpm run demo failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
  process.exit(1);
});
