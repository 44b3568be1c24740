import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import type { Hex } from 'viem';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { createClient, type JobSpec } from '@gpufarm/client';
import { ANVIL_ACCOUNTS } from '@gpufarm/control-plane/testing';
import { createFsBlobStore } from '@gpufarm/control-plane/artifacts';
import { openPostgres } from '@gpufarm/control-plane/db';
import { expireUnfunded } from '@gpufarm/control-plane/jobs';
import { appendServiceLine } from '@gpufarm/control-plane/logs';
import { formatUsdCents, tokenUnitsToDecimalString, VERIFICATION_LEVEL_TEXT, type Job } from '@gpufarm/shared';
import { enrollAgent } from './helpers/agent.js';
import { Customer } from './helpers/customer.js';
import { lookAt, signInToDashboard, type DashboardSession } from './helpers/dashboard.js';
import { escrowJob, ethWithdrawable, whileRefusingEth, withdrawOnPage } from './helpers/escrow.js';
import { busyboxSpec } from './helpers/jobs.js';
import { Marketplace } from './helpers/marketplace.js';
import { until } from './helpers/wait.js';

/**
 * The customer dashboard as a person uses it, in Chromium, against the real control plane, anvil
 * and an agent running containers: the wallet is the test EIP-1193 provider signing with an
 * anvil dev key; everything else is the production code.
 */

t.setTimeout(600_000);

const FARM = 'dash-farm';
// Long enough to approve or dispute from the page inside the window.
const market = await Marketplace.start(t, { challengeWindowSeconds: 900 });
const agent = await enrollAgent(market, { name: 'agent', farm: FARM, payout: privateKeyToAddress(generatePrivateKey()), priceUsd: '0.50', gpus: '1x rtx-4090-24gb' });
agent.start();
await market.waitForCapacity(FARM, 1);
const CUSTOMER = ANVIL_ACCOUNTS[1];

/**
 * A job printing 200 lines at once (more than the log box shows), then `live-1` … `live-<count>`
 * a second apart, then writing its output: two files.
 */
const liveJob = (count: number) =>
  busyboxSpec(
    market.images,
    `seq 1 200; i=1; while [ $i -le ${count} ]; do echo live-$i; i=$((i+1)); sleep 1; done; echo result > /output/result.txt; mkdir /output/data; seq 1 1000 > /output/data/seq.txt`,
  );

const logText = (session: DashboardSession) => session.page.getByLabel('Log lines').textContent();

async function jobOf(apiKey: string, id: string): Promise<Job> {
  return createClient({ baseUrl: market.url, apiKey }).jobs.get(id);
}

t.test('behavior: sign in, create a key and use it with the SDK, fund the job from the page, watch its lines arrive live, download the output verified, approve early and see the release on chain', async (t) => {
  const session = await signInToDashboard(t, market, CUSTOMER.privateKey);
  const { page } = session;
  t.same(session.consoleErrors.filter((e) => !/401/.test(e)), [], 'no console error while signing in (but the first session check)');

  await page.getByRole('link', { name: 'API keys' }).click();
  await page.getByLabel('Label').fill('sdk from the dashboard test');
  await page.getByRole('button', { name: 'Create key' }).click();
  const shown = page.getByRole('region', { name: 'New API key' });
  const apiKey = /gf_test_[A-Za-z0-9_-]{43}/.exec((await shown.textContent()) ?? '')?.[0];
  if (!apiKey) throw new Error('the new key is not shown');
  await lookAt(t, session, 'keys: the new key shown once');
  await page.getByRole('button', { name: 'I saved the key' }).click();
  t.equal(await page.getByText(apiKey).count(), 0, 'the key is no longer on the page once saved');

  const gf = createClient({ baseUrl: market.url, apiKey });
  const created = await gf.jobs.create(liveJob(15) as JobSpec);
  t.equal(created.job.status, 'CREATED', 'the key made on the page creates a job through the SDK');
  await page.reload();
  await page.getByRole('table', { name: 'API keys' }).getByText('sdk from the dashboard test').waitFor();
  await until(async () => (await session.api('GET', '/keys')).status === 200 && JSON.stringify((await session.api('GET', '/keys')).body).includes('"lastUsedAt":"'), 'the key shows when it was last used');

  await page.goto(created.job.links.dashboard);
  await page.getByRole('heading', { name: new RegExp(`Job ${created.job.id} CREATED`) }).waitFor();
  await lookAt(t, session, 'job: created, to fund');
  await page.getByRole('button', { name: 'Fund job' }).click();
  await page.getByText('Done: Funding confirmed').waitFor({ timeout: 120_000 });
  t.ok(session.wallet.calls.includes('eth_sendTransaction'), 'the page sent the funding transactions through the wallet');

  // Live: a line shows while the job still runs, and later lines follow on the same page.
  const navigations: string[] = [];
  page.on('framenavigated', (frame) => navigations.push(frame.url()));
  await page.getByLabel('Log lines').getByText('live-3').waitFor({ timeout: 180_000 });
  const whileRunning = await jobOf(apiKey, created.job.id);
  t.equal(whileRunning.status, 'RUNNING', 'live-3 was shown while the job was running');
  t.notMatch((await logText(session)) ?? '', /live-15/, 'before the last line was written');
  const soFar = (await page.locator('.running-cost').textContent()) ?? '';
  t.match(soFar, /^\$\d+\.\d{2,} so far \(estimate\): .* on 1 GPU at \$0\.50 per GPU-hour/, `the cost so far while it runs, labeled an estimate: ${soFar}`);
  await lookAt(t, session, 'job: running with live logs');
  // A reader scrolled into the log keeps their place as lines arrive and when the job ends.
  const logBox = page.getByLabel('Log lines');
  const place = await logBox.evaluate((el) => {
    el.scrollTop = 300;
    return el.scrollTop;
  });
  t.ok(place > 0, 'the log scrolls in its box');
  await logBox.scrollIntoViewIfNeeded();
  const onScreen = (await logBox.boundingBox())!.y;
  await page.getByLabel('Log lines').getByText('live-15').waitFor({ timeout: 120_000 });
  t.same(navigations, [], 'the lines arrived without a reload');
  await page.getByRole('heading', { name: new RegExp(`Job ${created.job.id} COMPLETED`) }).waitFor({ timeout: 120_000 });
  await page.getByText(/; the job ended \(COMPLETED\)/).waitFor();
  t.equal(await logBox.evaluate((el) => el.scrollTop), place, 'the log is where the reader left it after the job ended');
  t.ok(Math.abs((await logBox.boundingBox())!.y - onScreen) < 2, 'and so is the page: the cards above it grew without moving it');

  await page.getByRole('checkbox', { name: 'stdout' }).uncheck();
  t.notMatch((await logText(session)) ?? '', /live-1/, 'stdout lines hidden when unchecked');
  await page.getByRole('checkbox', { name: 'stdout' }).check();
  await page.getByRole('searchbox', { name: 'Search logs' }).fill('live-12');
  t.match((await logText(session)) ?? '', /live-12/);
  t.notMatch((await logText(session)) ?? '', /live-11/, 'the search keeps only matching lines');
  await page.getByRole('searchbox', { name: 'Search logs' }).fill('');

  await page.getByRole('heading', { name: new RegExp(`Job ${created.job.id} COMPLETED`) }).waitFor({ timeout: 120_000 });
  const job = await jobOf(apiKey, created.job.id);
  const output = job.artifacts.find((a) => a.id === job.result?.outputArtifactId);
  if (!output) throw new Error('the job stored no output');
  const words = VERIFICATION_LEVEL_TEXT[job.verificationLevel!];
  const levelWords = (await page.locator('dd', { hasText: words.attests }).textContent()) ?? '';
  t.ok(levelWords.includes(words.doesNotAttest), `the page says what ${job.verificationLevel} attests and what it does not, as docs/verification.md does`);
  const item = page.getByRole('listitem').filter({ hasText: output.filename });
  const saved = page.waitForEvent('download');
  await item.getByRole('button', { name: 'Download and verify' }).click();
  await item.getByRole('status', { name: 'Verified' }).waitFor();
  t.match((await item.getByRole('status', { name: 'Verified' }).textContent()) ?? '', job.result!.serverHash!, 'the page shows the verified hash');
  const file = await (await saved).path();
  t.equal(createHash('sha256').update(readFileSync(file)).digest('hex'), job.result!.serverHash, 'the saved file has the recorded bytes');
  await lookAt(t, session, 'job: completed, output verified');

  // The output's files as the server listed them from the tar, one downloaded alone and verified.
  const files = page.getByRole('table', { name: 'Files in the output' });
  await files.waitFor();
  t.same((await files.getByRole('rowheader').allTextContents()).sort(), ['data/seq.txt', 'result.txt'], 'the files of the output tar');
  const listed = (await session.api('GET', `/jobs/${created.job.id}/output/files`)).body as { tarSha256: string; files: { path: string; sha256: string }[] };
  t.equal(listed.tarSha256, job.result!.serverHash, 'listed from the tar the result names');
  const seq = listed.files.find((f) => f.path === 'data/seq.txt')!;
  const seqRow = files.getByRole('row').filter({ hasText: 'data/seq.txt' });
  const savedOne = page.waitForEvent('download');
  await seqRow.getByRole('button', { name: 'Download and verify data/seq.txt' }).click();
  await seqRow.getByRole('status', { name: 'Verified' }).waitFor();
  t.match((await seqRow.getByRole('status', { name: 'Verified' }).textContent()) ?? '', seq.sha256, 'the page shows the listed hash, verified');
  const one = readFileSync(await (await savedOne).path());
  t.equal(createHash('sha256').update(one).digest('hex'), seq.sha256, 'the saved file has the listed bytes');
  t.equal(one.toString(), `${Array.from({ length: 1000 }, (_, i) => i + 1).join('\n')}\n`, 'and they are the file the job wrote');
  await lookAt(t, session, 'job: output files, one verified');

  t.equal((await escrowJob(market, job.receipt!.jobKey as Hex)).statusName, 'Completed', 'the challenge window is open');
  // Approving asks first, with what moves: the payment out, the rest of the deposit back.
  const approveDialog = page.getByRole('dialog', { name: `Release the payment for job ${created.job.id} now?` });
  const sentBefore = session.wallet.calls.filter((c) => c === 'eth_sendTransaction').length;
  await page.getByRole('button', { name: 'Approve early' }).click();
  const asked = (await approveDialog.textContent()) ?? '';
  const paid = tokenUnitsToDecimalString(BigInt(job.receipt!.amount), job.payment.decimals);
  const back = tokenUnitsToDecimalString(BigInt(job.payment.maxPayment) - BigInt(job.receipt!.amount), job.payment.decimals);
  t.ok(asked.includes(`${paid} ${job.payment.symbol} (`) && asked.includes(`goes to the machine's farm and gpufarm's fee, and the rest of your deposit, ${back} ${job.payment.symbol}, comes back`), `the confirmation names the payment and what comes back: ${asked}`);
  await lookAt(t, session, 'job: approve confirmation');
  await approveDialog.getByRole('button', { name: 'Not now' }).click();
  await approveDialog.waitFor({ state: 'hidden' });
  t.equal(session.wallet.calls.filter((c) => c === 'eth_sendTransaction').length, sentBefore, '"Not now" sends nothing');
  session.wallet.rejectNextTransaction();
  await page.getByRole('button', { name: 'Approve early' }).click();
  await approveDialog.getByRole('button', { name: 'Approve and release' }).click();
  const refused = page.getByRole('alert').filter({ hasText: /Failed: Approve early/ });
  await refused.waitFor();
  t.match((await refused.textContent()) ?? '', /rejected/i, 'a refused transaction shows as failed, with the reason');
  await lookAt(t, session, 'job: approval refused in the wallet');
  t.equal((await escrowJob(market, job.receipt!.jobKey as Hex)).statusName, 'Completed', 'nothing changed on chain');
  await page.getByRole('button', { name: 'Approve early' }).click();
  await approveDialog.getByRole('button', { name: 'Approve and release' }).click();
  await page.getByText(/Mined: Approve early/).waitFor({ timeout: 60_000 });
  t.equal((await escrowJob(market, job.receipt!.jobKey as Hex)).statusName, 'Released', 'released on chain by the approval');
  await page.getByText('Escrow status: released').waitFor({ timeout: 60_000 });
  await page.getByRole('heading', { name: new RegExp(`Job ${created.job.id} RELEASED`) }).waitFor();
  t.pass('the badge says the payment was released, not only that the job completed');
  await page.getByText(/^closed early: the payment was released before its end/).waitFor();
  t.pass('the challenge window reads closed by the approval, not as a time still ahead');
  const released = await jobOf(apiKey, created.job.id);
  t.match(released.receipt?.transactions.release, /^0x[0-9a-f]{64}$/, 'the release transaction is recorded');
  await page.getByText(released.receipt!.transactions.release!.slice(0, 10)).first().waitFor();
  const timeline = page.getByRole('region', { name: 'Timeline' });
  await timeline.getByText(released.receipt!.transactions.fund!).first().waitFor();
  await timeline.getByText(released.receipt!.transactions.release!).first().waitFor({ timeout: 30_000 });
  t.pass('the timeline shows the funding and release transactions');
  // The start, phase by phase (issue 34, `job.startup`): each row says its phase's state as the API does.
  const start = page.getByRole('region', { name: 'Start', exact: true });
  await start.getByText(/^Running .* after it was queued/).waitFor();
  const phases = released.startup!.phases;
  t.equal(phases.run.status, 'done');
  for (const [label, phase] of [['Queued', phases.queued], ['Image pull', phases.pull], ['Container made and started', phases.container], ['First log line', phases.firstLog], ['Run', phases.run]] as const) {
    const row = start.getByRole('row').filter({ hasText: new RegExp(`^${label}`) });
    const text = (await row.textContent()) ?? '';
    t.match(text, phase.status === 'skipped' ? 'skippedthe machine already had the image' : 'done', `${label}: ${phase.status}`);
  }
  // The deposit, the charge and the unspent part that went back, as the billing entries say.
  const money = page.getByRole('region', { name: 'Money' });
  const dollars = (micro: number) => `$${formatUsdCents(micro)}`;
  const charged = released.cost!.totalMicroUsd;
  await money.filter({ hasText: `Returned to your wallet${dollars(released.pricing.maxCostMicroUsd - charged)}` }).waitFor({ timeout: 30_000 });
  const moneyText = (await money.textContent()) ?? '';
  t.match(moneyText, `Deposit${dollars(released.pricing.maxCostMicroUsd)}`, 'the deposit');
  t.match(moneyText, `Charged${dollars(charged)} ${dollars(released.cost!.computeMicroUsd)} compute + ${dollars(released.cost!.feeMicroUsd)} fee`, 'the charge, compute + fee');
  t.notMatch(moneyText, 'Still in escrow', 'nothing left in escrow after the release');
  await lookAt(t, session, 'job: released by early approval');

  await page.getByRole('link', { name: 'Jobs', exact: true }).click();
  await page.getByRole('table', { name: 'Jobs' }).getByRole('link', { name: new RegExp(created.job.id) }).waitFor();
  const listRow = page.getByRole('row').filter({ hasText: created.job.id });
  t.match((await listRow.textContent()) ?? '', /RELEASED/, 'the list shows the same badge');
  await listRow.getByText(/^busybox@[0-9a-f]{8}…$/).waitFor();
  const cells = await listRow.getByRole('cell').allTextContents();
  t.match(cells[0], /busybox$/, 'the title under the id');
  t.match(cells[2], /\d{1,2}:\d{2}/, 'when it was created, to the minute');
  t.match(cells[5], /^\d+(\.\d)? (s|min)$/, 'how long it ran');
  const jobsTable = page.getByRole('table', { name: 'Jobs' });
  t.ok(await jobsTable.evaluate((table) => table.parentElement!.scrollWidth <= table.parentElement!.clientWidth), 'at 1280 px every column of the list shows');
  await lookAt(t, session, 'jobs list');
  await page.getByRole('link', { name: 'Billing' }).click();
  await page.getByRole('table', { name: 'Totals per month' }).waitFor();
  const returnedRow = page.getByRole('table', { name: 'Billing entries' }).getByRole('row').filter({ hasText: created.job.id }).filter({ hasText: 'Returned to wallet' });
  t.match((await returnedRow.textContent()) ?? '', dollars(released.pricing.maxCostMicroUsd - charged), 'the release entry says what went back to the wallet, not $0.00');
  t.match((await page.getByRole('table', { name: 'Totals per month' }).textContent()) ?? '', /FundedChargedReturned/, 'the month says where each deposit went');
  await lookAt(t, session, 'billing');
  await page.getByRole('link', { name: 'Capacity' }).click();
  await page.getByRole('table', { name: 'Capacity offers' }).getByText(/RTX 4090/i).first().waitFor();
  await page.getByRole('table', { name: 'Capacity offers' }).getByText('Simulated', { exact: true }).first().waitFor();
  t.pass('the offer of the simulated agent says its GPUs are simulated, not proven');
  await lookAt(t, session, 'capacity');
  await page.getByLabel('Proven GPUs only').check();
  await page.getByRole('button', { name: 'Apply filters' }).click();
  await page.getByText('No offers match').waitFor();
  t.pass('asked for proven GPUs only, the simulated machine is not listed');
  await page.setViewportSize({ width: 375, height: 800 });
  await page.goto(created.job.links.dashboard);
  await page.getByText('Escrow status: released').waitFor();
  await lookAt(t, session, 'job on a phone');
  t.same(session.cspViolations, [], 'no Content-Security-Policy violation');
});

t.test('behavior: dispute a completed job from the page and see it held; a tampered artifact is shown as an integrity error, never as verified', async (t) => {
  const customer = await Customer.create(market, 2);
  const { created } = await customer.createFundedJob(busyboxSpec(market.images, 'echo disputed; echo bytes > /output/result.txt'));
  const done = await customer.waitForStatus(created.job.id, ['COMPLETED'], 180_000);
  const session = await signInToDashboard(t, market, ANVIL_ACCOUNTS[2].privateKey);
  const { page } = session;
  await page.goto(created.job.links.dashboard);
  await page.getByRole('button', { name: 'Dispute' }).click();
  const disputeDialog = page.getByRole('dialog', { name: `Dispute the result of job ${created.job.id}?` });
  t.match((await disputeDialog.textContent()) ?? '', /The escrow holds the whole deposit, [0-9.]+ \S+, and pays nobody until gpufarm resolves the dispute/, 'the confirmation says the deposit is held');
  await disputeDialog.getByLabel(/^Why do you dispute the result/).fill('the output is not what the job writes');
  await disputeDialog.getByLabel(/^Evidence/).fill('expected "disputed" in result.txt');
  await lookAt(t, session, 'job: dispute confirmation with a reason');
  await disputeDialog.getByRole('button', { name: 'Dispute and hold the payment' }).click();
  await page.getByText(/Mined: Dispute/).waitFor({ timeout: 60_000 });
  t.same(await market.query('SELECT dispute_reason, dispute_evidence FROM jobs WHERE id = $1', [created.job.id]), [{ dispute_reason: 'the output is not what the job writes', dispute_evidence: 'expected "disputed" in result.txt' }], 'the service stored the reason and evidence for the admin');
  t.equal((await escrowJob(market, done.receipt!.jobKey as Hex)).statusName, 'Disputed', 'disputed on chain: no release until resolved');
  await page.getByText('Escrow status: disputed').waitFor({ timeout: 60_000 });
  t.equal(await page.getByRole('button', { name: 'Approve early' }).count(), 0, 'no approval offered once disputed');
  await page.getByRole('heading', { name: new RegExp(`Job ${created.job.id} DISPUTED`) }).waitFor();
  await page.getByText(/^closed by the dispute, before its end/).waitFor();
  t.pass('the badge and the challenge window say the payment is held by the dispute');
  await lookAt(t, session, 'job: disputed');
  const held = await until(async () => {
    const j = await customer.getJob(created.job.id);
    return j.receipt?.status === 'disputed' ? j : undefined;
  }, 'the service to record the dispute');
  t.equal(held.receipt?.transactions.release ?? null, null, 'nothing released');

  const output = done.artifacts.find((a) => a.id === done.result?.outputArtifactId)!;
  const stored = createFsBlobStore(join(market.root, 'control-plane', 'artifacts')).pathOf(output.sha256);
  const bytes = readFileSync(stored);
  bytes[0] = bytes[0]! ^ 0xff;
  writeFileSync(stored, bytes);
  let downloads = 0;
  page.on('download', () => (downloads += 1));
  const item = page.getByRole('listitem').filter({ hasText: output.filename });
  await item.getByRole('button', { name: 'Download and verify' }).click();
  const alert = item.getByRole('alert', { name: 'Integrity error' });
  await alert.waitFor();
  t.match((await alert.textContent()) ?? '', output.sha256, 'the recorded hash is shown beside the computed one');
  t.equal(await item.getByRole('status', { name: 'Verified' }).count(), 0, 'never shown as verified');
  t.equal(downloads, 0, 'no file offered');
  await lookAt(t, session, 'artifact: integrity error');
});

t.test('behavior: a refund the escrow could not send to the wallet shows on the job and billing pages, and the wallet withdraws it from the billing page', async (t) => {
  const wallet = ANVIL_ACCOUNTS[3];
  const customer = await Customer.create(market, 3);
  const { created } = await customer.createFundedJob({ ...busyboxSpec(market.images, 'echo refund later'), paymentToken: 'eth' });
  const done = await customer.waitForStatus(created.job.id, ['COMPLETED'], 180_000);
  const session = await signInToDashboard(t, market, wallet.privateKey);
  const { page } = session;
  await page.goto(created.job.links.dashboard);
  await page.getByRole('button', { name: 'Approve early' }).waitFor();
  // While the approval releases the job, the wallet refuses ETH: its refund stays in the escrow.
  await whileRefusingEth(market, wallet.address, async () => {
    await page.getByRole('button', { name: 'Approve early' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Approve and release' }).click();
    await page.getByText(/Mined: Approve early/).waitFor({ timeout: 60_000 });
  });
  t.equal(await ethWithdrawable(market, wallet.address), BigInt(done.payment.maxPayment) - BigInt((await escrowJob(market, done.receipt!.jobKey as Hex)).payout), 'the refund waits in the escrow');
  const waiting = page.getByRole('region', { name: 'Escrow' }).getByText(/could not be sent to your wallet/);
  await waiting.waitFor({ timeout: 60_000 });
  await lookAt(t, session, 'job: refund waiting for withdrawal');

  await page.getByRole('link', { name: 'Billing' }).click();
  const row = page.getByRole('region', { name: 'Refunds waiting for withdrawal' }).getByRole('row').filter({ hasText: created.job.id });
  await row.waitFor({ timeout: 30_000 });
  await lookAt(t, session, 'billing: refund waiting for withdrawal');
  const txHash = await withdrawOnPage(t, market, page, row, wallet.address);
  await page.goto(created.job.links.dashboard);
  await page.getByRole('region', { name: 'Escrow' }).getByText('Withdrawn', { exact: true }).waitFor({ timeout: 60_000 });
  t.match((await customer.getJob(created.job.id)).receipt?.withdrawal, { status: 'withdrawn', withdrawTxHash: txHash }, 'the job records the withdrawal and its transaction');
  await lookAt(t, session, 'job: refund withdrawn');
});

t.test('behavior: cancel a funded job that no machine fits from its page, after a confirmation that names the deposit, and claim the refund there', async (t) => {
  const customer = await Customer.create(market, 1);
  // 1024 GiB of VRAM: no machine of this market fits it, so it stays QUEUED.
  const { created } = await customer.createFundedJob(busyboxSpec(market.images, 'echo never runs', { gpu: { count: 1, minimumVramGb: 1024 } }));
  const id = created.job.id;
  await customer.waitForStatus(id, ['QUEUED']);
  const session = await signInToDashboard(t, market, CUSTOMER.privateKey);
  const { page } = session;
  await page.goto(created.job.links.dashboard);
  const noFit = page.getByRole('region', { name: 'No machine fits this job now' });
  await noFit.waitFor();
  t.match((await noFit.textContent()) ?? '', /The most memory per GPU offered is 24 GB; the job asks at least 1024 GB/, 'the page says why no machine fits');
  const dialog = page.getByRole('dialog', { name: `Cancel job ${id}?` });
  await page.getByRole('button', { name: 'Cancel job' }).click();
  await dialog.getByText(/becomes a refund you claim with your wallet/).waitFor();
  await lookAt(t, session, 'job: cancel confirmation');
  await dialog.getByRole('button', { name: 'Keep the job' }).click();
  await dialog.waitFor({ state: 'hidden' });
  t.equal((await customer.getJob(id)).status, 'QUEUED', '"Keep the job" leaves it queued');

  await page.getByRole('button', { name: 'Cancel job' }).click();
  await dialog.getByRole('button', { name: 'Cancel the job' }).click();
  await page.getByRole('button', { name: 'Claim refund' }).waitFor({ timeout: 60_000 });
  const canceled = await customer.getJob(id);
  t.equal(canceled.status, 'CANCELED', 'the job is canceled');
  await page.getByRole('heading', { name: new RegExp(`Job ${id} CANCELED`) }).waitFor();
  t.equal(await page.getByRole('button', { name: 'Cancel job' }).count(), 0, 'and its page offers no Cancel any more');
  const money = page.getByRole('region', { name: 'Money' });
  const deposit = `$${formatUsdCents(canceled.pricing.maxCostMicroUsd)}`;
  await money.filter({ hasText: `Still in escrow${deposit} the refund waits for your claim` }).waitFor();
  t.pass('the Money card says the deposit waits in the escrow for the claim');
  await lookAt(t, session, 'job: canceled, refund to claim');
  await page.getByRole('button', { name: 'Claim refund' }).click();
  await page.getByText(/Mined: Claim refund/).waitFor({ timeout: 60_000 });
  t.equal((await escrowJob(market, canceled.payment.escrowJobKey as Hex)).statusName, 'Refunded', 'the escrow refunded the deposit on chain');
  await page.getByRole('region', { name: 'Escrow' }).getByText('Refunded', { exact: true }).waitFor({ timeout: 60_000 });
  await page.getByRole('heading', { name: new RegExp(`Job ${id} REFUNDED`) }).waitFor();
  t.pass('the badge says the deposit went back');
  await money.filter({ hasText: `Returned to your wallet${deposit}` }).waitFor({ timeout: 30_000 });
  t.match((await money.textContent()) ?? '', /Charged\$0\.00 none: the job ended without a charge/, 'nothing charged');
  t.notMatch((await money.textContent()) ?? '', 'Still in escrow', 'nothing held any more');
  await lookAt(t, session, 'job: canceled and refunded');
});

t.test('behavior: a new customer launches a shell job from the New job form with an input uploaded from the browser: errors shown at the fields, the spec as JSON, then funded from its page and run to the end', async (t) => {
  const INPUT_TEXT = 'input bytes from the browser\n';
  const SCRIPT = 'echo "$GREETING from the form"; cat /input/greeting_data.txt; echo made > /output/result.txt';
  const session = await signInToDashboard(t, market, CUSTOMER.privateKey);
  const { page } = session;
  await page.getByRole('link', { name: 'Jobs', exact: true }).click();
  await page.getByRole('link', { name: 'New job' }).first().click();
  await page.getByRole('heading', { name: 'New job' }).waitFor();
  const form = page.getByRole('form', { name: 'New job' });

  // Nothing typed but a bad environment line: the errors are at their fields.
  await form.getByLabel('Environment', { exact: true }).fill('NOT A VARIABLE');
  await form.getByRole('button', { name: 'Create job' }).click();
  await form.getByRole('alert').waitFor();
  t.equal(await form.getByLabel('Image', { exact: true }).getAttribute('aria-invalid'), 'true', 'the image is marked invalid');
  t.match((await form.getByLabel('Image', { exact: true }).evaluate((el) => document.getElementById(el.getAttribute('aria-describedby')!.split(' ').at(-1)!)?.textContent)) ?? '', /^image /, 'its error names the field');
  t.match((await form.getByLabel('Environment', { exact: true }).evaluate((el) => el.getAttribute('aria-describedby'))) ?? '', /errors/, 'the environment line has its error');
  t.match((await form.getByRole('alert').textContent()) ?? '', /fields need a change/);
  await lookAt(t, session, 'new job: errors at the fields');

  await form.getByLabel('Title', { exact: true }).fill('from the form');
  await form.getByLabel('Image', { exact: true }).fill(market.images.busybox.reference);
  await form.getByLabel('Script', { exact: true }).fill(SCRIPT);
  await form.getByLabel('Environment', { exact: true }).fill('GREETING=hello');
  // An input uploaded from the browser (POST /v1/artifacts), mounted at /input/<mount name>.
  await form.getByLabel('Add input files').setInputFiles({ name: 'greeting data.txt', mimeType: 'text/plain', buffer: Buffer.from(INPUT_TEXT) });
  await form.getByText(new RegExp(`^uploaded, ${INPUT_TEXT.length} B, SHA-256 ${createHash('sha256').update(INPUT_TEXT).digest('hex').slice(0, 6)}…`)).waitFor();
  t.equal(await form.getByLabel(/^Mount name for/).inputValue(), 'greeting_data.txt', 'a mount name the server takes, made from the file name');
  await form.getByLabel('GPU class', { exact: true }).selectOption('rtx-4090-24gb');
  t.match(
    (await form.getByLabel('GPU class', { exact: true }).locator('option[value="rtx-4090-24gb"]').textContent()) ?? '',
    /^[^:]*RTX 4090[^:]*: from \$0\.50\/GPU-hour, \d+ available \(0 proven\), tier [SABC] at best, \S/,
    'each class says its price, what is free (none of it proven: the agent simulates its GPU), its best tier and where',
  );
  await form.getByLabel('Price cap (USD per GPU-hour)', { exact: true }).fill('0.50');
  await form.getByLabel('Runtime limit (minutes)', { exact: true }).fill('60');
  // Will it match: more memory than any offered GPU has is warned about before creating.
  await form.getByLabel('Minimum VRAM per GPU (GB)', { exact: true }).fill('100');
  const noFit = form.getByRole('region', { name: 'No machine on the market fits this job now' });
  await noFit.waitFor();
  t.match((await noFit.textContent()) ?? '', /The most memory per GPU offered of rtx-4090-24gb is 24 GB; the job asks at least 100 GB/, 'the form warns before creating, and says why');
  await lookAt(t, session, 'new job: no machine fits');
  await form.getByLabel('Minimum VRAM per GPU (GB)', { exact: true }).fill('');
  await noFit.waitFor({ state: 'hidden' });
  t.match((await form.getByText(/^At most \$/).textContent()) ?? '', /^At most \$0\.5\d \(compute \$0\.50 \+ fee \$0\.0\d\)/, 'the most it can cost: 0.50 × 1 GPU × 60 minutes, plus the fee');
  const json = JSON.parse((await form.getByLabel('Job spec as JSON', { exact: true }).textContent()) ?? '') as Record<string, unknown>;
  t.same(json.command, ['sh', '-c', SCRIPT], 'the spec runs the script with sh -c');
  t.match(json.inputs, [{ artifactId: /^art_/, mountName: 'greeting_data.txt' }], 'with the uploaded input');
  t.same(json.gpu, { count: 1, modelAllowlist: ['rtx-4090-24gb'] }, 'on the class picked from the offers');
  t.same([json.maxPricePerGpuHour, json.maxRuntimeSeconds, json.env], ['0.50', 3600, { GREETING: 'hello' }]);
  t.equal(await form.getByRole('alert').count(), 0, 'no error left once the fields are right');
  await lookAt(t, session, 'new job: filled in');

  await form.getByRole('button', { name: 'Create job' }).click();
  const heading = page.getByRole('heading', { name: /^Job job_\w+ CREATED/ });
  await heading.waitFor();
  const jobId = /Job (job_\w+)/.exec((await heading.textContent()) ?? '')![1]!;
  await page.getByRole('button', { name: 'Fund job' }).click();
  await page.getByText('Done: Funding confirmed').waitFor({ timeout: 120_000 });
  await page.getByRole('heading', { name: new RegExp(`Job ${jobId} COMPLETED`) }).waitFor({ timeout: 180_000 });
  t.match((await page.getByRole('region', { name: 'Funding' }).textContent()) ?? '', /^Funding\s*Funded: the escrow holds at most/, 'the funding card no longer says the job waits for its escrow');
  await page.getByLabel('Log lines').getByText('hello from the form').waitFor();
  await page.getByLabel('Log lines').getByText(INPUT_TEXT.trim()).waitFor();
  t.pass('the job read the input uploaded from the browser');
  await page.getByText('from the form', { exact: true }).waitFor();
  t.equal(((await session.api('GET', `/jobs/${jobId}/timeline`)).body as { title: string | null }).title, 'from the form', 'the job has the title typed');
  t.equal(((await session.api('GET', `/v1/jobs/${jobId}`)).body as Job).status, 'COMPLETED', 'and ran to its end, funded from its page');
  await lookAt(t, session, 'new job: run from the form');

  // Run again: the form opens with this job's spec; creating it makes a new job.
  const runs = page.getByRole('region', { name: 'What it runs' });
  t.match((await runs.textContent()) ?? '', /echo "\$GREETING from the form"; cat \/input\/greeting_data.txt/, 'the job page shows the script it ran');
  await runs.getByRole('link', { name: 'Run again' }).click();
  await page.getByText(`Run again: the form holds job ${jobId}'s spec.`, { exact: false }).waitFor();
  const again = page.getByRole('form', { name: 'New job' });
  t.equal(await again.getByLabel('Image', { exact: true }).inputValue(), market.images.busybox.reference, 'the image is filled in');
  t.equal(await again.getByLabel('Script', { exact: true }).inputValue(), SCRIPT, 'and the script');
  t.equal(await again.getByLabel(/^Mount name for art_/).inputValue(), 'greeting_data.txt', 'and the input, already stored');
  t.equal(await again.getByLabel('Environment', { exact: true }).inputValue(), 'GREETING=hello', 'and the environment');
  t.equal(await again.getByLabel('GPU class', { exact: true }).inputValue(), 'rtx-4090-24gb', 'and the class');
  await lookAt(t, session, 'new job: run again');
  await again.getByRole('button', { name: 'Create job' }).click();
  const second = page.getByRole('heading', { name: /^Job job_\w+ CREATED/ });
  await second.waitFor();
  t.not(/Job (job_\w+)/.exec((await second.textContent()) ?? '')![1], jobId, 'a new job');
});

t.test('behavior: a customer starts the canary from a built-in template, saves a past job as a template of their own from the form, and starts from it again', async (t) => {
  const session = await signInToDashboard(t, market, ANVIL_ACCOUNTS[2].privateKey);
  const { page } = session;
  const openNewJob = async () => {
    await page.getByRole('link', { name: 'Jobs', exact: true }).click();
    await page.getByRole('link', { name: 'New job' }).first().click();
    await page.getByRole('heading', { name: 'New job' }).waitFor();
  };
  const createdId = async () => {
    const heading = page.getByRole('heading', { name: /^Job job_\w+ CREATED/ });
    await heading.waitFor();
    return /Job (job_\w+)/.exec((await heading.textContent()) ?? '')![1]!;
  };
  await openNewJob();
  const picker = page.getByRole('region', { name: 'Start from a template' });
  await picker.getByLabel('Template', { exact: true }).selectOption('canary');
  t.match((await picker.textContent()) ?? '', /The service’s canary/, 'the template says what it runs');
  t.match((await picker.textContent()) ?? '', /You have no templates of your own yet/, 'and that the account has none of its own');
  await lookAt(t, session, 'new job: template picker');
  await picker.getByRole('button', { name: 'Use template' }).click();
  await page.getByText('Template canary: the form holds its spec.', { exact: false }).waitFor();
  const form = page.getByRole('form', { name: 'New job' });
  t.equal(await form.getByLabel('Image', { exact: true }).inputValue(), market.images.canary.reference, 'the canary image, pinned by digest');
  t.equal(await form.getByLabel('Arguments', { exact: true }).inputValue(), 'sha256-chain\n100000', 'its command as arguments');
  t.match(JSON.parse((await form.getByLabel('Job spec as JSON', { exact: true }).textContent()) ?? ''), { deterministic: true, workloadType: 'batch' });
  await form.getByRole('button', { name: 'Create job' }).click();
  const canaryId = await createdId();
  t.match(((await session.api('GET', `/jobs/${canaryId}/timeline`)).body as { spec: unknown }).spec, { image: market.images.canary.reference, command: ['sha256-chain', '100000'] }, 'the job runs the canary');

  // Any past job can become a template: Run again fills the form, Save as template keeps it.
  await page.getByRole('region', { name: 'What it runs' }).getByRole('link', { name: 'Run again' }).click();
  await page.getByText(`Run again: the form holds job ${canaryId}'s spec.`, { exact: false }).waitFor();
  const save = page.getByRole('form', { name: 'Save as template' });
  const name = save.getByLabel('Template name', { exact: true });
  await name.fill('My Canary');
  await save.getByRole('button', { name: 'Save as template' }).click();
  t.equal(await name.getAttribute('aria-invalid'), 'true', 'a name of the wrong form is refused at the field');
  await name.fill('my-canary');
  await save.getByLabel('Template description', { exact: true }).fill('the canary, from a past job');
  await save.getByRole('button', { name: 'Save as template' }).click();
  await save.getByRole('status').filter({ hasText: 'Saved as template my-canary' }).waitFor();
  await save.getByRole('button', { name: 'Save as template' }).click();
  const taken = save.getByRole('alert').filter({ hasText: 'You already have a template named my-canary' });
  await taken.waitFor();
  await lookAt(t, session, 'new job: template name taken');
  await taken.getByRole('button', { name: 'Replace my-canary' }).click();
  await save.getByRole('status').filter({ hasText: 'Saved as template my-canary (replaced)' }).waitFor();
  t.pass('a taken name is replaced only when asked');

  await openNewJob();
  await picker.getByLabel('Template', { exact: true }).selectOption('my-canary');
  t.match((await picker.textContent()) ?? '', /the canary, from a past job/, 'its own template, with its description');
  await picker.getByRole('button', { name: 'Use template' }).click();
  t.equal(await form.getByLabel('Image', { exact: true }).inputValue(), market.images.canary.reference, 'the saved spec fills the form');
  await form.getByRole('button', { name: 'Create job' }).click();
  const fromSaved = await createdId();
  t.not(fromSaved, canaryId, 'a new job from the saved template');

  // Never funded, it expires: the expiry transition run now on this market's database (the
  // server runs it on its timer, a day after creation), for the jobs of this file left unfunded.
  const db = openPostgres(market.databaseUrl, { max: 1 });
  try {
    t.ok((await expireUnfunded({ db, effects: { serviceLine: (tx, jobId, line) => appendServiceLine(tx, jobId, line) } }, { ttlSeconds: 1 })) >= 1, 'the unfunded jobs expire');
  } finally {
    await db.close();
  }
  // The canary job of this test was created seconds ago: older than the second asked.
  await page.goto(`${market.url}/dashboard/jobs/${canaryId}`);
  await page.getByRole('heading', { name: new RegExp(`Job ${canaryId} EXPIRED`) }).waitFor({ timeout: 30_000 });
  t.equal(await page.getByRole('button', { name: 'Fund job' }).count(), 0, 'an expired job offers no funding');
  await page.getByLabel('Log lines').getByText(/^expired: not funded within 1 second of its creation/).waitFor();
  await lookAt(t, session, 'job: expired unfunded');
  t.same(session.cspViolations, [], 'no Content-Security-Policy violation');
});
