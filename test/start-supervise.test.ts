import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { exitedWithin, isAlive, signalIfStill } from './helpers/processes.js';
import { npmStart } from './helpers/start.js';
import { until } from './helpers/wait.js';

/**
 * `npm start` watches its children: the control plane and the agent come back when killed, the
 * chain's death stops everything, and the agent never sees the control plane's secrets. Stopped
 * as `timeout` and CI runners stop it, by a signal to its whole process group, it stops them all.
 */

// Two starts of the whole marketplace and three restarts of its children, each up to two minutes
// when every core is busy (a CI run on two slow cores).
t.setTimeout(600_000);
/** How long a start, a restart or a stop of `npm start` or one of its children may take. */
const STEP_MS = 120_000;

/** `NAME=value` pairs of a running process's environment. */
function environOf(pid: number): Map<string, string> {
  return new Map(
    readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .filter(Boolean)
      .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)] as const),
  );
}

t.test('behavior: a killed control plane and agent are restarted, a killed chain stops everything; the agent and the chain hold no secret', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'gf-start-supervise-'));
  const start = await npmStart(t, dataDir);
  await start.waitForOutput(/Stop with Ctrl-C/, 'the banner', STEP_MS);
  const banner = start.output();
  const url = /API\s+(http:\/\/\S+)\/v1/.exec(banner)![1]!;
  const controlPlanePid = Number(/control plane pid (\d+)/.exec(banner)![1]);
  const anvilPid = Number(/Local chain \(anvil, chain \d+, pid (\d+)/.exec(banner)![1]);
  const agentPid = Number(/Local agent: machine .* pid (\d+)/.exec(banner)![1]);

  const secrets = environOf(controlPlanePid);
  for (const [child, pid] of [['agent', agentPid], ['chain', anvilPid]] as const) {
    const env = environOf(pid);
    for (const name of ['GF_ADMIN_TOKEN', 'GF_OPERATOR_PRIVATE_KEY']) {
      const value = secrets.get(name);
      t.ok(value, `the control plane has ${name}`);
      t.notOk(env.has(name), `the ${child}'s environment has no ${name}`);
      t.notOk([...env.values()].some((v) => v.includes(value!)), `nor its value under another name`);
    }
  }

  const linksUp = () => start.output().match(/ link up: /g)?.length ?? 0;
  const links = linksUp();
  signalIfStill(controlPlanePid, /control-plane\/src\/main\.ts/);
  await start.waitForOutput(/the control plane \(pid \d+\) exited with signal SIGKILL; its last lines:/, 'the control plane named with how it ended', STEP_MS);
  const again = await start.waitForOutput(/the control plane is running again \(pid (\d+)\)/, 'the control plane restarted', STEP_MS);
  t.not(Number(again[1]), controlPlanePid, 'a new control plane process');
  t.equal((await fetch(`${url}/v1`)).status, 200, 'answering at the same address');
  await until(() => linksUp() > links, 'the agent to link again', { timeoutMs: STEP_MS, describe: () => start.tail(10) });

  signalIfStill(agentPid, /gf-agent\.js run/);
  await start.waitForOutput(/the local agent \(pid \d+\) exited with signal SIGKILL; its last lines:/, 'the agent named with how it ended', STEP_MS);
  const agentAgain = await start.waitForOutput(/the local agent is running again \(pid (\d+)\)/, 'the agent restarted', STEP_MS);
  const newAgentPid = Number(agentAgain[1]);
  t.notOk(environOf(newAgentPid).has('GF_ADMIN_TOKEN'), 'the restarted agent holds no secret either');
  await until(
    async () => ((await (await fetch(`${url}/v1/capacity?farm=local`)).json()) as { data: unknown[] }).data.length === 1,
    'the local farm offered again',
    { timeoutMs: STEP_MS },
  );

  signalIfStill(anvilPid, /anvil/);
  await start.waitForOutput(/the local chain \(anvil\) \(pid \d+\) exited with signal SIGKILL/, 'the chain named', STEP_MS);
  t.match(start.output(), /nothing runs without it: stopping the marketplace/, 'says why everything stops');
  t.equal(await start.exited, 1, 'npm start exits non-zero');
  t.notOk(isAlive(Number(again[1])), 'the control plane is stopped');
  t.notOk(isAlive(newAgentPid), 'the agent is stopped');
});

t.test('behavior: npm start in a process group of its own, given SIGTERM as a group twice (timeout, a CI runner, npm forwarding it), stops the control plane, the agent and the chain, then exits', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'gf-start-group-'));
  const start = await npmStart(t, dataDir, {}, { throughNpm: true });
  await start.waitForOutput(/Stop with Ctrl-C/, 'the banner', STEP_MS);
  const banner = start.output();
  const children = {
    'the control plane': Number(/control plane pid (\d+)/.exec(banner)![1]),
    'the chain': Number(/Local chain \(anvil, chain \d+, pid (\d+)/.exec(banner)![1]),
    'the agent': Number(/Local agent: machine .* pid (\d+)/.exec(banner)![1]),
  };
  for (const [name, pid] of Object.entries(children)) t.ok(isAlive(pid), `${name} runs (pid ${pid})`);

  process.kill(-start.pid, 'SIGTERM');
  // The same signal again while it stops, as a second group signal or npm's forwarding delivers it.
  await new Promise((r) => setTimeout(r, 100));
  try {
    process.kill(-start.pid, 'SIGTERM');
  } catch {
    // the whole group is already gone
  }
  const exited = await exitedWithin(start.child, STEP_MS);
  t.ok(exited, 'npm start exits');
  if (!exited) t.comment(start.tail(15));
  // npm exits once its shell does; the supervisor under it may still be stopping its children.
  await until(() => Object.values(children).every((pid) => !isAlive(pid)), 'every child of npm start to stop', {
    timeoutMs: 60_000,
    describe: () => `${Object.entries(children).map(([name, pid]) => `${name} (pid ${pid}): ${isAlive(pid) ? 'running' : 'stopped'}`).join(', ')}\n${start.tail(10)}`,
  }).catch((err: unknown) => t.fail(String(err)));
  for (const [name, pid] of Object.entries(children)) t.notOk(isAlive(pid), `${name} is stopped`);
});
