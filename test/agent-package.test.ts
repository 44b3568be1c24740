import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { installGlobally, outside, packWorkspace, workspaceImportsUnder } from '../client/test/helpers/package.js';
import { enrollAgent } from './helpers/agent.js';
import { Customer, linesOf } from './helpers/customer.js';
import { busyboxSpec } from './helpers/jobs.js';
import { Marketplace, ROOT } from './helpers/marketplace.js';

/**
 * The agent as a farm operator installs it: the `npm pack` tarball installed with `npm install -g`
 * into a prefix of its own, run with plain node and no NODE_OPTIONS (no tsx, no source
 * condition), then enrolled with a real control plane and given a real job.
 */

// A pack, an install from the registry, a marketplace and a container: minutes.
t.setTimeout(300_000);

t.test('default: the packed agent installs with npm outside the repository; the installed gf-agent prints its version, passes doctor, enrolls and runs a job', async (t) => {
  const work = await mkdtemp(join(tmpdir(), 'gf-agent-pack-'));
  t.teardown(() => rm(work, { recursive: true, force: true }));
  const version = (JSON.parse(await readFile(join(ROOT, 'agent/package.json'), 'utf8')) as { version: string }).version;

  // prepack builds dist/ before npm packs it.
  const { tarball, paths, dir: pkgDir, manifest } = await packWorkspace(ROOT, 'agent', work);
  t.same(paths, ['README.md', 'dist/gf-agent.js', 'dist/pack-worker.js', 'package.json'], 'the compiled command, its worker, the manifest and the README, nothing else');
  t.same(Object.keys(manifest.dependencies ?? {}).sort(), ['dockerode', 'systeminformation'], 'npm installs dockerode and systeminformation, no @gpufarm/* package');
  t.equal(manifest.bin?.['gf-agent'], './dist/gf-agent.js', 'the gf-agent bin is the compiled entry');
  t.same(await workspaceImportsUnder(join(pkgDir, 'dist')), [], 'no import of a workspace package is left in dist/');
  t.match(await readFile(join(pkgDir, 'dist/gf-agent.js'), 'utf8'), /^#!\/usr\/bin\/env node\n/, 'gf-agent.js starts with its shebang');

  const prefix = await installGlobally(tarball, work);
  const installed = join(prefix, 'lib/node_modules/@gpufarm/agent');
  t.notOk(existsSync(join(installed, 'node_modules/tsx')) || existsSync(join(installed, 'node_modules/typescript')), 'neither tsx nor typescript is installed with it');
  const gfAgent = join(prefix, 'bin/gf-agent');

  const versionOut = await outside(gfAgent, ['--version'], work);
  t.equal(versionOut.stdout.trim(), version, 'gf-agent --version prints the package version');

  const doctorEnv = { GF_AGENT_STATE_DIR: join(work, 'doctor-state'), GF_AGENT_SIMULATE_GPUS: '1x rtx-4090-24gb', GF_AGENT_MIN_FREE_DISK_BYTES: '0' };
  const doctor = await outside(gfAgent, ['doctor', '--json'], work, doctorEnv);
  const checks = JSON.parse(doctor.stdout) as Array<{ name: string; status: string }>;
  t.equal(checks.find((c) => c.name === 'docker socket')?.status, 'ok', 'doctor reached Docker through the installed dockerode');
  t.same(checks.filter((c) => c.status === 'fail'), [], 'doctor exits 0 with no failed check');

  const market = await Marketplace.start(t);
  const farm = 'agent-package';
  const agent = await enrollAgent(market, { name: 'installed-agent', farm, payout: privateKeyToAddress(generatePrivateKey()), command: ['env', '-u', 'NODE_OPTIONS', gfAgent] });
  agent.start();
  await market.waitForCapacity(farm, 1);
  const customer = await Customer.create(market, 1);
  const { created } = await customer.createFundedJob(busyboxSpec(market.images, 'echo from the installed agent; echo data > /output/data.txt'));
  const { lines, jobStatus } = await customer.tailLogs(created.job.id);
  t.equal(jobStatus, 'COMPLETED', 'the job ran to COMPLETED on the installed agent');
  t.same(linesOf(lines, 'stdout').map((l) => l.line), ['from the installed agent'], 'its stdout streamed through the installed agent');
  const job = await customer.getJob(created.job.id);
  t.equal(job.assignment?.farm.slug, farm, "on the installed agent's farm");
  t.equal(job.result?.hashesMatch, true, 'the output the worker thread packed and hashed matches the server re-hash');
  const download = await customer.download(job.result!.outputArtifactId!);
  t.equal(download.sha256, job.result!.serverHash, 'the output downloads with the recorded hash');
});
