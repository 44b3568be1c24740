import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { capacityListSchema, pricingSchema } from '@gpufarm/shared';
import t from 'tap';
import { exitedWithin } from './helpers/processes.js';

const ROOT = new URL('..', import.meta.url).pathname;
const run = promisify(execFile);

// Three starts of the whole marketplace, each up to two minutes on a busy machine, and two tsx
// commands: 480 s was passed in a CI run on two slow cores.
t.setTimeout(900_000);

/** Starts `npm start`'s script on a fresh embedded database and waits for its banner. */
async function startMarketplace(t: { teardown(fn: () => unknown): void }, dataDir: string, env: Record<string, string> = {}): Promise<{ child: ChildProcess; url: string; output: () => string }> {
  const child = spawn(process.execPath, ['--conditions=@gpufarm/source', '--import', 'tsx', join(ROOT, 'scripts/src/start.ts')], {
    cwd: ROOT,
    env: { ...process.env, GF_DATA_DIR: dataDir, PORT: '0', DATABASE_URL: '', GF_ADMIN_TOKEN: '', GF_SEED_FLEET: '', GF_LOCAL_AGENT: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // SIGTERM, so the supervisor stops the chain and the control plane it started in process groups
  // of their own; a SIGKILL to it would leave them running. SIGKILL only if it hangs.
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    if (!(await exitedWithin(child, 15_000))) child.kill('SIGKILL');
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no banner within 120 s:\n${output}`)), 120_000);
    const check = () => {
      const match = /API\s+(http:\/\/\S+)\/v1/.exec(output);
      if (match?.[1] && output.includes('Stop with Ctrl-C')) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout?.on('data', check);
    child.once('exit', (code) => reject(new Error(`npm start exited with ${code}:\n${output}`)));
  });
  return { child, url, output: () => output };
}

t.test('npm start: the control plane on the embedded database with a seeded fleet (GF_SEED_FLEET); npm run admin reaches it', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'gf-start-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const env = { GF_SEED_FLEET: '60', GF_LOCAL_AGENT: '0' };
  const { child, url, output } = await startMarketplace(t, dataDir, env);
  t.match(output(), /seeded a simulated fleet/);
  t.match(output(), /npm run admin -- create-key/, 'says how to create a key');
  t.match(output(), /No local agent: GF_LOCAL_AGENT=0/, 'says why no agent runs');
  t.ok(output().includes(`dashboard  ${url}/dashboard/`), 'prints the dashboard URL');
  const dashboard = await fetch(`${url}/dashboard/`);
  t.equal(dashboard.status, 200, 'the dashboard answers there');
  t.match(await dashboard.text(), /<div id="root"><\/div>/, 'with the web app');
  t.match(dashboard.headers.get('content-security-policy'), /script-src 'self'/, 'under its CSP');
  t.ok(output().includes(`operator   ${url}/operator/`), 'prints the operator area URL');
  t.ok(output().includes(`admin      ${url}/admin/`), 'prints the admin area URL');
  t.match(output(), /admin wallets: 0x90f79bf6eb2c4f870365e785982e1f101e93b906/, 'the local admin wallet is anvil dev account 3');
  for (const area of ['operator', 'admin']) t.equal((await fetch(`${url}/${area}/`)).status, 200, `the ${area} area answers`);

  const capacity = await fetch(`${url}/v1/capacity?limit=3`);
  t.equal(capacity.status, 200);
  const list = capacityListSchema.parse(await capacity.json());
  t.equal(list.data.length, 3);
  t.ok(list.data.every((offer) => offer.simulated), 'seeded offers are marked simulated');
  pricingSchema.parse(await (await fetch(`${url}/v1/pricing`)).json());

  // While the server owns the embedded database, the admin command goes through its admin API.
  const admin = await run(process.execPath, ['--conditions=@gpufarm/source', '--import', 'tsx', join(ROOT, 'scripts/src/admin.ts'), 'create-key', '--wallet', '0x70997970C51812dc3A010C7d01b50e0d17dc79C8', '--scopes', 'billing:read'], {
    cwd: ROOT,
    env: { ...process.env, GF_DATA_DIR: dataDir, DATABASE_URL: '' },
  });
  const key = /^(gf_test_\S+)$/m.exec(admin.stdout)?.[1];
  t.ok(key, 'the key is printed');
  const billing = await fetch(`${url}/v1/billing`, { headers: { authorization: `Bearer ${key}` } });
  t.equal(billing.status, 200);

  // A second process must not open the same embedded database.
  const seed = await run(process.execPath, ['--conditions=@gpufarm/source', '--import', 'tsx', join(ROOT, 'scripts/src/seed.ts'), '--machines', '5'], {
    cwd: ROOT,
    env: { ...process.env, GF_DATA_DIR: dataDir, DATABASE_URL: '' },
  }).catch((err: unknown) => err as { code: number; stderr: string });
  t.equal((seed as { code: number }).code, 1);
  t.match((seed as { stderr: string }).stderr, /in use by the control plane/);

  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
  t.notOk(existsSync(join(dataDir, 'control-plane.json')), 'the state file is removed on a clean stop');

  // Restarted on the same data, nothing is seeded twice, the key still works and the chain's escrow is reused.
  const again = await startMarketplace(t, dataDir, env);
  t.notMatch(again.output(), /seeded a simulated fleet/);
  t.equal((await fetch(`${again.url}/v1/billing`, { headers: { authorization: `Bearer ${key}` } })).status, 200);
  const escrowLine = /escrow\s+(0x[0-9a-f]{40})(.*)/;
  const reused = escrowLine.exec(again.output());
  t.match(reused?.[2], /\(reused\)/, 'the saved escrow is reused');
  again.child.kill('SIGTERM');
  await new Promise((resolve) => again.child.once('exit', resolve));

  // A chain saved with another escrow code (an older checkout) gets the current escrow deployed.
  const chainJson = join(dataDir, 'chain.json');
  writeFileSync(chainJson, JSON.stringify({ ...JSON.parse(readFileSync(chainJson, 'utf8')), escrowCodeHash: `0x${'0'.repeat(64)}` }));
  const upgraded = await startMarketplace(t, dataDir, env);
  const fresh = escrowLine.exec(upgraded.output());
  t.notMatch(fresh?.[2], /\(reused\)/, 'a new escrow is deployed');
  t.not(fresh?.[1], reused?.[1], 'at another address');
  upgraded.child.kill('SIGTERM');
  await new Promise((resolve) => upgraded.child.once('exit', resolve));
});
