import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ROOT } from './helpers/marketplace.js';
import { isAlive, spawnProcess } from './helpers/processes.js';
import { npmStart } from './helpers/start.js';

/**
 * The README's walk-through (docs/local-marketplace.md in full) as a newcomer runs it: `npm start` (control plane, anvil, the
 * registry and images, one local agent) and then `npm run demo` in another terminal.
 */

// Separate processes, real containers and a chain: minutes, not the default two.
t.setTimeout(300_000);


t.test('behavior: without Docker, npm start says how to install and start it, and runs the control plane without an agent', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'gf-start-nodocker-'));
  const start = await npmStart(t, dataDir, { DOCKER_HOST: `unix://${join(dataDir, 'no-docker.sock')}` });
  await start.waitForOutput(/Stop with Ctrl-C/, 'the banner', 180_000);
  t.match(start.output(), /^\[start\] preparing Docker Engine and the local registry \(scripts\/prepare-docker\.sh\)$/m, 'it ran the Docker preparation');
  // dockerd already runs on this machine, so the preparation starts no second one on that socket.
  t.match(start.output(), /^\[start\] prepare-docker: Docker Engine does not answer on \S+no-docker\.sock \(DOCKER_HOST\), and dockerd \(pid \d+\) already runs on this machine: point DOCKER_HOST at its socket, or unset DOCKER_HOST/m, 'says what to do');
  t.match(start.output(), /No local agent: Docker Engine or the local registry is not ready, so no local agent runs: jobs are accepted and funded but stay QUEUED\./);
  const url = /API\s+(http:\/\/\S+)\/v1/.exec(start.output())![1]!;
  t.equal((await fetch(`${url}/v1/pricing`)).status, 200, 'the control plane answers');
  await start.stop();
  t.equal(await start.exited, 0, 'a clean stop');
});

t.test('behavior: npm start runs the marketplace with a local agent; npm run demo runs a canary job to a verified download', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'gf-start-demo-'));
  const start = await npmStart(t, dataDir);
  await start.waitForOutput(/Stop with Ctrl-C/, 'the banner', 120_000);
  t.match(start.output(), /^\[start\] prepare-docker: Docker Engine \S+ answers on \S+, the registry on http:\/\/127\.0\.0\.1:5000\/v2\/$/m, 'it prepared Docker and the registry first');
  t.match(start.output(), /Local agent: machine \S+ \(enrolled now\), farm local/, `the banner names the agent:\n${start.tail(40)}`);
  t.match(start.output(), /offers\s+1x RTX 4090 24GB \(simulated\) in \/v1\/capacity/, 'and what it offers');
  const url = /API\s+(http:\/\/\S+)\/v1/.exec(start.output())![1]!;
  const capacity = (await (await fetch(`${url}/v1/capacity?farm=local`)).json()) as { data: { simulated: boolean; count: number }[] };
  t.equal(capacity.data.length, 1, 'the local farm is listed');
  t.equal(capacity.data[0]?.simulated, true, 'with simulated GPUs');

  const demo = spawnProcess('demo', process.execPath, ['--conditions=@gpufarm/source', '--import', 'tsx', join(ROOT, 'scripts/src/demo.ts')], { cwd: ROOT, env: { GF_DATA_DIR: dataDir, GF_API_KEY: '', GF_ENDPOINT: '', GF_ADMIN_TOKEN: '' } });
  const code = await demo.exited;
  t.equal(code, 0, `npm run demo succeeds:\n${demo.tail(60)}\n${start.tail(30)}`);
  const out = demo.output();
  for (const step of ['Find the running marketplace', 'Create an API key', 'Create the canary job', 'Fund it from the wallet', 'Confirm the funding', 'Tail the logs', 'Read the job', 'Download the output', 'The escrow receipt']) t.match(out, step);
  t.match(out, /verification level: RESULT_VERIFIED/);
  t.match(out, /equals X-Artifact-Sha256 and the job's result\.serverHash: intact/);
  t.match(out, /result\.txt \w+…: equals sha256\^n\(job id\) computed here/);
  t.match(out, /completion tx 0x[0-9a-f]{64}/);
  t.match(out, /Done: job \S+ COMPLETED, RESULT_VERIFIED/);
  const saved = /bytes saved to (\S+)/.exec(out)?.[1];
  t.ok(saved && readFileSync(saved).length > 0, 'the output is saved');

  await start.stop(15_000);
  t.equal(await start.exited, 0, 'npm start stops cleanly on SIGTERM');
  const agentPid = Number(/pid (\d+)\n/.exec(start.output())?.[1]);
  t.notOk(isAlive(agentPid), 'the agent stopped with it');
});
