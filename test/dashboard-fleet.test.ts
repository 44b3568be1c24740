import { createHash } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Locator } from 'playwright-core';
import t from 'tap';
import type { Address, Hash, Hex } from 'viem';
import { ANVIL_ACCOUNTS } from '@gpufarm/control-plane/testing';
import { gpuFarmEscrowAbi, imageCacheKey } from '@gpufarm/shared';
import { fakeHostRoot } from '@gpufarm/agent/testing/fake-driver-host';
import { fakeNvidiaSmi } from '@gpufarm/agent/testing/fake-nvidia-smi';
import { enrollAgent, type TestAgent } from './helpers/agent.js';
import { Customer } from './helpers/customer.js';
import { lookAt, signInToDashboard } from './helpers/dashboard.js';
import { balanceAt, escrowJob, ethWithdrawable, whileRefusingEth, withdrawOnPage } from './helpers/escrow.js';
import { busyboxSpec } from './helpers/jobs.js';
import { Marketplace } from './helpers/marketplace.js';
import { until } from './helpers/wait.js';

/**
 * The operator and admin areas of the web app in Chromium, against the real control plane on
 * anvil: who may open which area, and what each area's pages do.
 */

// Chromium, a marketplace and two agents: 620 s in a CI run on two slow cores.
t.setTimeout(900_000);

const ADMIN = ANVIL_ACCOUNTS[2];
const OPERATOR = ANVIL_ACCOUNTS[3];
const CUSTOMER = ANVIL_ACCOUNTS[1];
const FARM = 'fleet-farm';

// A challenge window long enough to dispute a job before its release.
const market = await Marketplace.start(t, { env: { GF_ADMIN_WALLETS: ADMIN.address }, challengeWindowSeconds: 900 });
// The farm whose payout wallet is OPERATOR, with one machine in simulated mode.
const agent = await enrollAgent(market, { name: 'fleet-agent', farm: FARM, payout: OPERATOR.address, priceUsd: '0.50', gpus: '1x rtx-4090-24gb' });
agent.start();
await market.waitForCapacity(FARM, 1);

/** What the running agent last wrote to its status file (`gf-agent status` reads the same). */
function agentStatus(a: TestAgent): { draining?: boolean; health?: { status?: string; gpuProbe?: string } | null } {
  try {
    return JSON.parse(readFileSync(join(a.stateDir, 'status.json'), 'utf8')) as ReturnType<typeof agentStatus>;
  } catch {
    return {};
  }
}

t.test('error: a customer session cannot open /admin or /operator: the page says so and shows no area link', async (t) => {
  const session = await signInToDashboard(t, market, CUSTOMER.privateKey);
  const { page } = session;
  t.equal(await page.getByRole('navigation', { name: 'Areas' }).count(), 0, 'a customer sees no link to other areas');
  for (const area of ['admin', 'operator'] as const) {
    await page.goto(`${market.url}/${area}/`);
    const alert = page.getByRole('alert').filter({ hasText: `You cannot open the ${area} area` });
    await alert.waitFor();
    t.match(await alert.textContent(), CUSTOMER.address.toLowerCase(), `the ${area} page names the signed-in wallet`);
    t.equal(await page.getByRole('table').count(), 0, `the ${area} page shows no data`);
    await lookAt(t, session, `customer at /${area}`);
  }
  const res = await session.api('GET', '/auth/session');
  t.equal(res.status, 200, 'the customer stays signed in to the dashboard');
});

t.test('behavior: an admin and an operator see the links to their areas; the operator page names its farm and its role', async (t) => {
  const admin = await signInToDashboard(t, market, ADMIN.privateKey);
  const adminAreas = admin.page.getByRole('navigation', { name: 'Areas' });
  t.same(await adminAreas.getByRole('link').allTextContents(), ['Dashboard', 'Admin'], 'the admin sees the dashboard and admin areas');
  await adminAreas.getByRole('link', { name: 'Admin' }).click();
  await admin.page.waitForURL(`${market.url}/admin/overview`);
  await admin.page.getByRole('heading', { name: 'Fleet overview' }).waitFor();
  t.equal(await admin.page.getByText('You cannot open').count(), 0, 'the admin may open the admin area');

  const operator = await signInToDashboard(t, market, OPERATOR.privateKey);
  const operatorAreas = operator.page.getByRole('navigation', { name: 'Areas' });
  t.same(await operatorAreas.getByRole('link').allTextContents(), ['Dashboard', 'Operator'], 'the payout wallet sees the dashboard and operator areas');
  await operator.page.goto(`${market.url}/operator/operators`);
  const farm = operator.page.getByRole('region', { name: new RegExp(`\\(${FARM}\\)`) });
  await farm.waitFor();
  t.match(await farm.textContent(), /are its payout wallet/, 'the page says the wallet is the farm’s payout wallet');
  const staff = ANVIL_ACCOUNTS[4].address.toLowerCase();
  await farm.getByLabel('Operator wallet').fill(staff);
  await farm.getByRole('button', { name: 'Add operator' }).click();
  const listed = farm.getByRole('row').filter({ hasText: staff });
  await listed.waitFor();
  await lookAt(t, operator, 'operator: operators of the farm');
  const asStaff = await signInToDashboard(t, market, ANVIL_ACCOUNTS[4].privateKey);
  t.same(await asStaff.page.getByRole('navigation', { name: 'Areas' }).getByRole('link').allTextContents(), ['Dashboard', 'Operator'], 'the added wallet may open the operator area');
  await listed.getByRole('button', { name: 'Remove' }).click();
  await operator.page.getByRole('dialog', { name: `Remove ${staff} from ${FARM}?` }).getByRole('button', { name: 'Remove' }).click();
  await listed.waitFor({ state: 'detached' });
  t.equal((await asStaff.api('GET', '/auth/session')).status, 200, 'the removed wallet stays signed in');
  const roles = ((await asStaff.api('GET', '/auth/session')).body as { roles: { operatorFarms: unknown[] } }).roles;
  t.same(roles.operatorFarms, [], 'but runs no farm any more');
});

t.test('behavior: an admin drains a machine from its page (the agent is told), sees it in the audit log, and undrains it', async (t) => {
  const admin = await signInToDashboard(t, market, ADMIN.privateKey);
  const { page } = admin;
  // A minute of its heartbeats as the history keeps them: a simulated GPU reports no figures.
  await market.query(
    `INSERT INTO gpu_samples_minute (machine_id, gpu_index, bucket, samples) VALUES ($1, 0, date_trunc('minute', now()) - interval '5 minutes', 4) ON CONFLICT DO NOTHING`,
    [agent.machineId],
  );
  await page.goto(`${market.url}/admin/machines?farm=${FARM}`);
  await page.getByRole('link', { name: agent.machineId }).click();
  await page.getByRole('heading', { name: `Machine ${agent.machineId}` }).waitFor();
  await page.getByText(/^This machine's GPUs are simulated: its \d+ samples in this range carry no utilization, temperature, memory used, power \(a simulated GPU reports no figures\)\.$/).waitFor();
  t.equal(await page.getByText(/per GPU \(one point per/).count(), 0, 'no chart of gaps: the history says why it has no figures');
  // Its agent proved it at enrollment with the simulated plan: passed, never proven (no real GPU).
  const proof = page.getByRole('region', { name: 'GPU proof', exact: true });
  t.match(await proof.locator('dl').textContent(), /^ProofSimulated GPUs: nothing to prove, offered as simulatedVerified since.+Next idle re-check.+$/, 'the proof, when verified, the next re-check');
  const challenge = await proof.getByRole('table', { name: 'Recent GPU challenges' }).getByRole('row').nth(1).getByRole('cell').allTextContents();
  t.match(challenge, [/\d/, 'enrollment', 'passed', 'simulated', /^256×256×256, 4 rounds on 1 GPU$/, /^pre [0-9a-f]{6}…[0-9a-f]{4}.*go [0-9a-f]{6}…[0-9a-f]{4}/, /^[\d.]+ s \/ no window$/, /^[1-9]\d*$/, /^\d+ ms$/, 'none'], 'the challenge: cause, state, class, shape, seeds, times, rows checked');
  await lookAt(t, admin, 'admin: machine page');

  await page.getByRole('button', { name: 'Drain', exact: true }).click();
  const dialog = page.getByRole('dialog', { name: `Drain ${agent.machineId}?` });
  await dialog.getByLabel(/Reason/).fill('disk swap');
  await lookAt(t, admin, 'admin: drain confirmation');
  await dialog.getByRole('button', { name: 'Drain', exact: true }).click();
  await page.getByText('draining, no deadline').waitFor();
  await until(async () => agentStatus(agent).draining === true, 'the agent to get the drain message', { timeoutMs: 30_000 });
  t.pass('the agent’s status says it is draining');
  const available = async () => ((await (await fetch(`${market.url}/v1/capacity?farm=${FARM}`)).json()) as { data: { available: number }[] }).data.reduce((sum, o) => sum + o.available, 0);
  await until(async () => (await available()) === 0, 'the drained machine to leave /v1/capacity', { timeoutMs: 30_000 });
  t.pass('a drained machine is not offered');

  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Audit log' }).click();
  const row = page.getByRole('row').filter({ hasText: agent.machineId }).filter({ hasText: 'drain' }).first();
  await row.waitFor();
  t.match(await row.textContent(), ADMIN.address.toLowerCase(), 'the audit log names the admin wallet');
  await lookAt(t, admin, 'admin: audit log');

  await page.goBack();
  await page.getByRole('button', { name: 'Undrain' }).click();
  await page.getByRole('dialog', { name: `Undrain ${agent.machineId}?` }).getByRole('button', { name: 'Undrain' }).click();
  await page.getByRole('button', { name: 'Drain', exact: true }).waitFor();
  await until(async () => agentStatus(agent).draining === false, 'the agent to hear the drain lifted', { timeoutMs: 30_000 });
  await market.waitForCapacity(FARM, 1);
  t.pass('undrained: the agent is told and the machine is offered again');
});

t.test('behavior: an admin resolves a dispute from the page: the transaction is shown, the escrow released the job and paid each party', async (t) => {
  const customer = await Customer.create(market, 1);
  const { created } = await customer.createFundedJob(busyboxSpec(market.images, 'echo to dispute; echo disputed > /output/result.txt'));
  const done = await customer.waitForStatus(created.job.id, ['COMPLETED'], 180_000);
  const jobKey = done.receipt!.jobKey as Hex;
  const disputeTx = await customer.wallet.writeContract({ address: market.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'dispute', args: [jobKey] });
  await market.publicClient.waitForTransactionReceipt({ hash: disputeTx });
  await until(async () => (await customer.getJob(created.job.id)).receipt?.status === 'disputed', 'the service to record the dispute');
  const before = await escrowJob(market, jobKey);
  t.equal(before.statusName, 'Disputed');

  const admin = await signInToDashboard(t, market, ADMIN.privateKey);
  const { page } = admin;
  await page.goto(`${market.url}/admin/disputes`);
  const row = page.getByRole('row').filter({ hasText: created.job.id });
  await row.waitFor();
  t.match((await row.textContent()) ?? '', /none given \(disputed outside the dashboard\)/, 'a dispute sent from the wallet alone says it has no reason');
  await lookAt(t, admin, 'admin: disputes');
  // The job beside the decision: the words, the result's hashes, the outputs, the timeline, the log.
  await row.getByRole('link', { name: created.job.id }).click();
  await page.getByRole('heading', { name: new RegExp(`Job ${created.job.id} DISPUTED`) }).waitFor();
  t.match((await page.getByRole('region', { name: 'Dispute' }).textContent()) ?? '', /none given/, 'the dispute card says the customer gave no reason');
  const result = page.getByRole('region', { name: 'Result' });
  t.match((await result.textContent()) ?? '', new RegExp(`${done.result!.serverHash!.slice(0, 6)}.*the hashes match`), 'the server hash, and that it matches the host');
  await page.getByRole('log', { name: 'Log lines' }).getByText('to dispute').waitFor();
  t.pass('the log shows what the job wrote');
  await page.getByRole('region', { name: 'Timeline' }).getByText('Disputed', { exact: true }).waitFor();
  const output = done.artifacts.find((a) => a.kind === 'output')!;
  const [download] = await Promise.all([page.waitForEvent('download'), result.getByRole('link', { name: new RegExp(`Download ${output.filename}`) }).click()]);
  const saved = await download.path();
  t.equal(createHash('sha256').update(readFileSync(saved)).digest('hex'), output.sha256, 'the output the admin downloads is the recorded one');
  await lookAt(t, admin, 'admin: disputed job');
  await page.getByRole('region', { name: 'Dispute' }).getByRole('button', { name: 'Release' }).click();
  await page.getByRole('dialog', { name: `Release job ${created.job.id} to the farm?` }).getByRole('button', { name: 'Release' }).click();
  const mined = page.getByRole('status').filter({ hasText: `Mined: Release job ${created.job.id}` });
  await mined.waitFor({ timeout: 60_000 });
  const txHash = /0x[0-9a-f]{64}/.exec((await mined.textContent()) ?? '')?.[0] as Hash | undefined;
  if (!txHash) throw new Error('the page shows no transaction hash');
  await lookAt(t, admin, 'admin: dispute resolved');

  const receipt = await market.publicClient.getTransactionReceipt({ hash: txHash });
  t.equal(receipt.status, 'success', 'the transaction the page shows is mined');
  const after = await escrowJob(market, jobKey);
  t.equal(after.statusName, 'Released', 'the escrow released the job');
  const token = before.token as Address;
  const delta = async (who: Address) => (await balanceAt(market, token, who, receipt.blockNumber)) - (await balanceAt(market, token, who, receipt.blockNumber - 1n));
  t.equal(await delta(OPERATOR.address as Address), before.payout - before.fee, 'the farm is paid the recorded payout less the fee');
  t.equal(await delta(before.customer), before.amount - before.payout, 'the customer gets back what the payout leaves');
  await page.goto(`${market.url}/admin/disputes`);
  await page.getByText('No open dispute').waitFor();
  // The customer's own page of the job says how it ended: resolved, not only completed.
  const owner = await signInToDashboard(t, market, ANVIL_ACCOUNTS[1].privateKey);
  await owner.page.goto(created.job.links.dashboard);
  await owner.page.getByRole('heading', { name: new RegExp(`Job ${created.job.id} RESOLVED`) }).waitFor({ timeout: 60_000 });
  t.pass('the customer sees the job RESOLVED');
});

t.test('behavior: an operator sees a machine "not earning: GPU probe failed" with the probe output and the fix, then earning once fixed', async (t) => {
  // A real GPU reading (fake nvidia-smi with a recorded RTX 4090) and the container probe with
  // an image that is not on this machine: the probe fails as it does on a box without it.
  const smiDir = mkdtempSync(join(tmpdir(), 'gf-fleet-smi-'));
  t.teardown(() => rmSync(smiDir, { recursive: true, force: true }));
  const fixture = join(import.meta.dirname, '../agent/test/fixtures/nvidia-smi/rtx-4090.xml');
  writeFileSync(join(smiDir, 'nvidia-smi'), `#!/bin/sh\ncase "$*" in\n  *-x*) cat "${fixture}" ;;\n  *) echo "fake nvidia-smi: only -q -x" >&2; exit 2 ;;\nesac\n`);
  chmodSync(join(smiDir, 'nvidia-smi'), 0o755);
  const realGpus = { GF_AGENT_SIMULATE_GPUS: '', GF_AGENT_NVIDIA_SMI: join(smiDir, 'nvidia-smi'), GF_AGENT_GPU_PROBE_IMAGE: 'gpufarm/test-no-such-probe-image:1' };
  const probed = await enrollAgent(market, { name: 'probe-agent', farm: FARM, payout: OPERATOR.address, priceUsd: '0.50', env: realGpus });
  probed.start();

  const operator = await signInToDashboard(t, market, OPERATOR.privateKey);
  const { page } = operator;
  await page.goto(`${market.url}/operator/machines`);
  const row = page.getByRole('row').filter({ hasText: probed.machineId });
  await row.getByText('Not earning').waitFor({ timeout: 60_000 });
  await row.getByText(/GPU probe failed/).waitFor({ timeout: 60_000 });
  t.match(await row.textContent(), /Fix:/, 'the row says what to do');
  const earningRow = page.getByRole('row').filter({ hasText: agent.machineId });
  t.match(await earningRow.textContent(), /Earning/, 'the healthy machine of the farm earns');
  await lookAt(t, operator, 'operator: machines, one not earning');

  await row.getByRole('link', { name: probed.machineId }).click();
  const verdict = page.getByRole('region', { name: 'Earning', exact: true });
  await verdict.getByText(/GPU probe failed/).waitFor();
  const probe = page.getByRole('region', { name: 'GPU probe' });
  t.match(await probe.textContent(), /gpufarm\/test-no-such-probe-image:1 is not on this machine/, 'the probe’s output is on the page');
  await lookAt(t, operator, 'operator: machine not earning');

  // The fix on this machine: it has no NVIDIA container runtime, so no container probe can pass
  // here; the agent is restarted with its GPUs simulated, which the control plane trusts without a probe.
  await probed.current!.stop();
  probed.start({ GF_AGENT_SIMULATE_GPUS: '1x rtx-4090-24gb' });
  await verdict.getByText('Not earning').waitFor({ state: 'detached', timeout: 60_000 });
  t.equal(await verdict.locator('.badge').textContent(), 'Earning', 'the verdict turned to earning');
  t.notMatch(await verdict.textContent(), /GPU probe failed/, 'the probe failure is gone');
  t.match(await page.getByRole('region', { name: 'Machine', exact: true }).textContent(), /GPU proofSimulated GPUs: nothing to prove/, 'its proof: simulated GPUs passed their challenge, never proven');
  await lookAt(t, operator, 'operator: machine earning again');

  await page.getByRole('button', { name: 'Drain', exact: true }).click();
  await page.getByRole('dialog', { name: `Drain ${probed.machineId}?` }).getByRole('button', { name: 'Drain', exact: true }).click();
  await verdict.getByText(/Drained/).waitFor({ timeout: 30_000 });
  await until(async () => agentStatus(probed).draining === true, 'the operator’s drain to reach the agent', { timeoutMs: 30_000 });
  t.pass('the operator drained the machine from its page: the verdict and the agent say so');
  await page.getByRole('button', { name: 'Undrain' }).click();
  await page.getByRole('dialog', { name: `Undrain ${probed.machineId}?` }).getByRole('button', { name: 'Undrain' }).click();
  await verdict.getByText(/Drained/).waitFor({ state: 'detached', timeout: 30_000 });
  await until(async () => agentStatus(probed).draining === false, 'the undrain to reach the agent', { timeoutMs: 30_000 });
});

t.test('behavior: an operator sees a failed pre-offer check on the machine page, its reason and its fix: a driver upgraded without a reboot', async (t) => {
  // The recorded nvidia-smi failure of a driver whose libraries (570.124) were upgraded under
  // a loaded 570.86.15 kernel module, and the driver's files as such a host has them.
  const smi = fakeNvidiaSmi('rtx-4090');
  t.teardown(smi.cleanup);
  smi.fail('driver-library-mismatch-570');
  const host = fakeHostRoot({ procVersion: 'proc-driver-nvidia-version-570.86.15-open', nvmlLibraries: ['570.124.06'] });
  t.teardown(host.cleanup);
  const env = { GF_AGENT_SIMULATE_GPUS: '', GF_AGENT_NVIDIA_SMI: join(smi.binDir, 'nvidia-smi'), GF_AGENT_HOST_ROOT: host.root, GF_AGENT_GPU_PROBE_IMAGE: 'gpufarm/test-no-such-probe-image:1' };
  const mismatched = await enrollAgent(market, { name: 'mismatch-agent', farm: FARM, payout: OPERATOR.address, priceUsd: '0.50', env });
  mismatched.start();

  const operator = await signInToDashboard(t, market, OPERATOR.privateKey);
  const { page } = operator;
  await page.goto(`${market.url}/operator/machines`);
  const row = page.getByRole('row').filter({ hasText: mismatched.machineId });
  await row.getByText(/Unhealthy: the NVIDIA kernel module \(570\.86\.15\) and the user-space libraries \(570\.124\)/).waitFor({ timeout: 60_000 });
  await row.getByRole('link', { name: mismatched.machineId }).click();
  const verdict = page.getByRole('region', { name: 'Earning', exact: true });
  await verdict.getByText(/are of different driver versions/).waitFor();
  t.match(await verdict.locator('.verdict-line').textContent(), /^Not earning ?Unhealthy: the NVIDIA kernel module \(570\.86\.15\) and the user-space libraries \(570\.124\) are of different driver versions .*until they match\.$/);
  const fix = verdict.locator('.verdict-fix');
  t.match(await fix.textContent(), /^Fix: Reboot, or reload the nvidia kernel modules \(stop the GPU processes and nvidia-persistenced, then rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe nvidia\), then run gf-agent doctor on the machine\.$/);
  t.same(await fix.locator('code').allTextContents(), ['rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe nvidia', 'gf-agent doctor'], 'the commands shown as code');
  t.notMatch(await verdict.textContent(), /no GPU/i, 'never "no GPU"');
  await lookAt(t, operator, 'operator: machine with a driver/library mismatch');
});

t.test('behavior: every admin page answers from the real server, with its data, in the one look', async (t) => {
  const admin = await signInToDashboard(t, market, ADMIN.privateKey);
  const { page } = admin;
  const nav = page.getByRole('navigation', { name: 'Main' });
  const visit = async (link: string, heading: string, shows: Locator) => {
    await nav.getByRole('link', { name: link, exact: true }).click();
    await page.getByRole('heading', { name: heading, level: 1 }).waitFor();
    await shows.first().waitFor();
    t.equal(await page.getByRole('alert').count(), 0, `${heading}: no error`);
    await lookAt(t, admin, `admin: ${heading.toLowerCase()}`);
  };
  await page.goto(`${market.url}/admin/`);
  await visit('Overview', 'Fleet overview', page.getByRole('figure', { name: 'Machines online' }));
  t.match(await page.getByRole('table', { name: 'GPUs by class and region' }).textContent(), /rtx-4090-24gb/, 'the overview counts the farm’s GPUs');
  await visit('Machines', 'Machines', page.getByRole('link', { name: agent.machineId }));
  await page.getByLabel('Farm').fill('no-such-farm');
  await page.getByRole('button', { name: 'Apply' }).click();
  await page.getByText('No machine matches these filters').waitFor();
  t.match(page.url(), /farm=no-such-farm/, 'the filter is in the URL');
  await page.goBack();
  await page.getByRole('link', { name: agent.machineId }).waitFor();
  await visit('Events', 'Events', page.getByRole('cell', { name: 'machine.enrolled' }));
  await visit('Farms', 'Farms', page.getByRole('row').filter({ hasText: FARM }));
  await visit('Accounts', 'Accounts', page.getByRole('table', { name: 'Accounts' }));
  await visit('Audit log', 'Audit log', page.getByRole('table', { name: 'Audit log' }));
});

t.test('behavior: an operator makes an enrollment token with its gf-agent enroll line, sets a class price, and reads the market and earnings', async (t) => {
  const operator = await signInToDashboard(t, market, OPERATOR.privateKey);
  const { page } = operator;
  await page.goto(`${market.url}/operator/enrollment`);
  await page.getByLabel('Region').fill('europe-north');
  await page.getByLabel('Price per GPU-hour (USD)').fill('0.75');
  await page.getByLabel('Label').fill('rack 2');
  await page.getByRole('button', { name: 'Create token' }).click();
  const shown = page.getByRole('region', { name: 'New enrollment token' });
  await shown.waitFor();
  t.match(await shown.textContent(), new RegExp(`gf-agent enroll --server \\S+ --token gfe_`), 'the enroll line is shown with its token');
  t.equal(await shown.getByRole('button', { name: 'Copy command' }).count(), 1, 'with a copy button');
  const tokenRow = page.getByRole('row').filter({ hasText: 'rack 2' });
  await tokenRow.waitFor();
  t.match(await tokenRow.textContent(), /europe-north.*\$0\.75.*unused/, 'the token is listed with its region, price and state');
  await lookAt(t, operator, 'operator: enrollment token created');
  await tokenRow.getByRole('button', { name: 'Revoke' }).click();
  await page.getByRole('dialog', { name: 'Revoke this enrollment token?' }).getByRole('button', { name: 'Revoke' }).click();
  await tokenRow.getByText(/^revoked /).waitFor();

  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Prices' }).click();
  const card = page.getByRole('region', { name: 'RTX 4090 24GB' });
  await card.getByRole('textbox', { name: /Price per GPU-hour/ }).fill('0.60');
  await card.getByRole('button', { name: 'Save price' }).click();
  await card.getByText('Now: $0.60 per GPU-hour').waitFor();
  await lookAt(t, operator, 'operator: prices');

  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Market' }).click();
  const market4090 = page.getByRole('row').filter({ hasText: 'RTX 4090 24GB' });
  await market4090.waitFor();
  t.match(await market4090.textContent(), /\$0\.60/, 'the market shows the new price as yours');
  // The jobs earlier cases funded ran the local busybox image: it heads the images customers asked for.
  const requested = page.getByRole('table', { name: 'Most requested images, last 7 days' });
  await requested.waitFor();
  const busybox = requested.getByRole('row').filter({ hasText: imageCacheKey(market.images.busybox.reference)! });
  await busybox.waitFor();
  t.match(await busybox.textContent(), /\d+/, 'the most requested images list the image the farm’s jobs ran, with its count');
  t.ok(await requested.evaluate((table) => table.parentElement!.scrollWidth <= table.parentElement!.clientWidth), `at ${page.viewportSize()?.width} px every column of the images shows, a long pinned reference wrapped`);
  await lookAt(t, operator, 'operator: market');

  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Earnings' }).click();
  const jobs = page.getByRole('table', { name: 'Earnings per job' });
  await jobs.waitFor();
  t.ok((await jobs.getByRole('row').count()) > 1, 'the farm’s jobs are in the ledger');
  t.ok(await jobs.evaluate((table) => table.parentElement!.scrollWidth <= table.parentElement!.clientWidth), `at ${page.viewportSize()?.width} px every column of the ledger shows, the release column not cut off`);
  const firstRow = jobs.getByRole('row').nth(1);
  t.match(await firstRow.getByRole('link').nth(0).getAttribute('href'), /^\/operator\/jobs\/job_/, 'each row links its job’s page');
  t.match(await firstRow.getByRole('link').nth(1).getAttribute('href'), /^\/operator\/machines\/mach_/, 'and its machine’s page');
  const csv = await page.getByRole('link', { name: 'Download CSV' }).getAttribute('href');
  const res = await fetch(`${market.url}${csv}`, { headers: { cookie: (await page.context().cookies(market.url)).map((c) => `${c.name}=${c.value}`).join('; ') } });
  t.equal(res.status, 200, 'the CSV link answers with the session');
  t.match(await res.text(), /^jobId,machineId,day,token/, 'with its header line');
  await lookAt(t, operator, 'operator: earnings');
});

t.test('behavior: an admin cordons a machine, quarantines a farm, suspends an account and revokes its key from the pages, each undone or shown', async (t) => {
  const admin = await signInToDashboard(t, market, ADMIN.privateKey);
  const { page } = admin;
  const confirm = (title: string | RegExp, button: string | RegExp) => page.getByRole('dialog', { name: title }).getByRole('button', { name: button, exact: typeof button === 'string' }).click();

  await page.goto(`${market.url}/admin/machines/${agent.machineId}`);
  await page.getByRole('button', { name: 'Cordon', exact: true }).click();
  await confirm(`Cordon ${agent.machineId}?`, 'Cordon');
  await page.getByText(/cordoned: not offered, the agent is not told/).waitFor();
  t.equal(agentStatus(agent).draining, false, 'a cordoned machine’s agent is not told');
  await page.getByRole('button', { name: 'Uncordon' }).click();
  await confirm(`Uncordon ${agent.machineId}?`, 'Uncordon');
  await page.getByRole('button', { name: 'Cordon', exact: true }).waitFor();

  await page.goto(`${market.url}/admin/farms`);
  const farm = page.getByRole('row').filter({ hasText: `(${FARM})` });
  await farm.getByRole('button', { name: 'Quarantine', exact: true }).click();
  await confirm(`Quarantine ${FARM}?`, 'Quarantine');
  await farm.getByText('quarantined', { exact: true }).waitFor();
  await lookAt(t, admin, 'admin: farm quarantined');
  await farm.getByRole('button', { name: 'Unquarantine' }).click();
  await confirm(`Lift the quarantine of ${FARM}?`, 'Unquarantine');
  await farm.getByText('active', { exact: true }).waitFor();
  await market.waitForCapacity(FARM, 1);

  const wallet = ANVIL_ACCOUNTS[1].address.toLowerCase();
  await page.goto(`${market.url}/admin/accounts`);
  await page.getByLabel('Wallet address').fill(wallet);
  await page.getByRole('button', { name: 'Search' }).click();
  const account = page.getByRole('row').filter({ hasText: wallet });
  await account.waitFor();
  t.match(page.url(), new RegExp(`wallet=${wallet}`), 'the search is in the URL');
  await account.getByRole('button', { name: 'Suspend' }).click();
  await confirm('Suspend this account?', 'Suspend');
  await account.getByText('suspended', { exact: true }).waitFor();
  await account.getByRole('button', { name: 'Reactivate' }).click();
  await confirm('Reactivate this account?', 'Reactivate');
  await account.getByText('active', { exact: true }).waitFor();
  const revoke = account.getByRole('button', { name: /^Revoke gf_/ }).first();
  await revoke.click();
  await confirm(/^Revoke the key/, /^Revoke gf_/);
  await account.getByText(/^revoked /).first().waitFor();
  await lookAt(t, admin, 'admin: account with a revoked key');

  await page.goto(`${market.url}/admin/audit`);
  const actions = (await page.getByRole('table', { name: 'Audit log' }).textContent()) ?? '';
  for (const action of ['cordon', 'quarantine', 'suspend', 'reactivate', 'api_key.revoke']) t.match(actions, action, `the audit log has the ${action}`);
});

t.test('behavior: an operator withdraws from the earnings page a payout the escrow could not send to the payout wallet, and sees it released', async (t) => {
  const customer = await Customer.create(market, 1);
  const { created } = await customer.createFundedJob({ ...busyboxSpec(market.images, 'echo paid later'), paymentToken: 'eth' });
  const done = await customer.waitForStatus(created.job.id, ['COMPLETED'], 180_000);
  // While the customer approves, the payout wallet refuses ETH: its payout stays in the escrow.
  await whileRefusingEth(market, OPERATOR.address, async () => {
    const approve = await customer.wallet.writeContract({ address: market.deployment.escrow, abi: gpuFarmEscrowAbi, functionName: 'approve', args: [done.receipt!.jobKey as Hex] });
    await market.publicClient.waitForTransactionReceipt({ hash: approve });
  });
  t.ok((await ethWithdrawable(market, OPERATOR.address)) > 0n, 'the payout waits in the escrow');

  const operator = await signInToDashboard(t, market, OPERATOR.privateKey);
  const { page } = operator;
  await page.goto(`${market.url}/operator/earnings`);
  const row = page.getByRole('region', { name: 'Payouts waiting for withdrawal' }).getByRole('row').filter({ hasText: created.job.id });
  await row.waitFor({ timeout: 60_000 });
  await page.getByRole('table', { name: 'Earnings per job' }).getByRole('row').filter({ hasText: created.job.id }).getByText('waiting for withdrawal', { exact: true }).waitFor();
  await lookAt(t, operator, 'operator: a payout waiting for withdrawal');
  await withdrawOnPage(t, market, page, row, OPERATOR.address);
  await page.reload();
  const paid = page.getByRole('table', { name: 'Earnings per job' }).getByRole('row').filter({ hasText: created.job.id });
  await paid.getByText('released', { exact: true }).waitFor();
  await lookAt(t, operator, 'operator: the payout withdrawn');
  // The job's page for its farm: what it earned, the escrow's transactions, its run on the machine.
  await paid.getByRole('link', { name: created.job.id }).click();
  await page.getByRole('heading', { name: `Job ${created.job.id}` }).waitFor();
  t.match((await page.getByRole('region', { name: 'Earning' }).textContent()) ?? '', /Earned\s*[\d.]+ ETH \(released\), after gpufarm's fee of [\d.]+ ETH/, 'what the farm earned, released');
  const run = await page.getByRole('table', { name: 'Runs on your machines' }).getByRole('row').nth(1).getByRole('cell').allTextContents();
  t.match(run, ['1 (the result)', /^mach_/, /^1 × /, /\/GPU-hour$/, /\d/, /\d/, 'exit code 0'], 'its run on the farm’s machine, the one that made the result');
  await lookAt(t, operator, 'operator: a job of the farm');
});
