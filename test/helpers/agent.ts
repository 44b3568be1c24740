import { execFile, execFileSync } from 'node:child_process';
import { chownSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Address } from 'viem';
import type { Marketplace } from './marketplace.js';
import { onEmergencyExit, spawnProcess, type TestProcess } from './processes.js';
import { testCommand } from '@gpufarm/shared/build/test-bundles';

const run = promisify(execFile);

export interface AgentOptions {
  /** Its name in diagnostics, such as `agent-a`. */
  name: string;
  farm: string;
  region?: string;
  priceUsd?: string;
  /** The farm's payout address (the escrow's provider). */
  payout: Address;
  /** Simulated GPUs, such as `1x rtx-4090-24gb`. */
  gpus?: string;
  /** More `GF_AGENT_*` settings. */
  env?: Record<string, string>;
  /** The command and its first arguments that start gf-agent; default: this repository's, through tsx. */
  command?: [string, ...string[]];
  /** The user and group `command` runs gf-agent as, when it switches users: the agent's folder is given to them. */
  owner?: { uid: number; gid: number };
}

/** A real `gf-agent` enrolled with the marketplace, in simulated mode, in a folder of its own. */
export interface TestAgent {
  name: string;
  machineId: string;
  stateDir: string;
  /** The running `gf-agent run`, if started. */
  current: TestProcess | null;
  /** Starts `gf-agent run` (again), with more `GF_AGENT_*` settings when given (another GPU set, say). */
  start(env?: Record<string, string>): TestProcess;
  /** Runs one other `gf-agent` command (`drain`, `undrain`, `status`) with this agent's settings; throws unless it exits 0. */
  command(args: string[]): Promise<void>;
}

/**
 * Enrolls an agent through the real `gf-agent enroll` with a token from the admin API and
 * returns it, not yet running. Its processes are SIGKILLed, its containers (labelled with its
 * machine id) removed, its loop mounts released and its folder deleted at the marketplace's stop.
 */
export async function enrollAgent(market: Marketplace, options: AgentOptions): Promise<TestAgent> {
  const root = mkdtempSync(join(tmpdir(), `gf-e2e-${options.name}-`));
  if (options.owner) chownSync(root, options.owner.uid, options.owner.gid);
  const stateDir = join(root, 'state');
  const env: Record<string, string> = {
    GF_AGENT_STATE_DIR: stateDir,
    GF_AGENT_WORK_DIR: join(root, 'work'),
    GF_AGENT_SIMULATE_GPUS: options.gpus ?? '1x rtx-4090-24gb',
    GF_AGENT_RECONNECT_INITIAL_MS: '50',
    GF_AGENT_RECONNECT_MAX_MS: '500',
    GF_AGENT_MIN_FREE_DISK_BYTES: '0',
    GF_AGENT_HEARTBEAT_INTERVAL_SECONDS: '1',
    // Several agents share this host: none takes the default metrics port unless a test asks.
    GF_AGENT_METRICS_LISTEN: 'off',
    ...options.env,
  };
  // The agent reads only its own GF_AGENT_* variables; none of this process's leak into it.
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GF_AGENT_')));
  const childEnv = { ...base, ...env };
  const [file, ...prefix] = options.command ?? testCommand('agent');
  const processes: TestProcess[] = [];
  let machineId: string | null = null;
  market.cleanups.push(async () => {
    for (const p of processes) await p.kill();
    if (machineId) await removeContainers(machineId);
    await releaseMounts(root);
    rmSync(root, { recursive: true, force: true });
  });

  const token = await market.createEnrollmentToken({ farm: options.farm, region: options.region ?? 'europe-west', priceUsd: options.priceUsd ?? '0.50', payout: options.payout });
  const enroll = spawnProcess(`${options.name}-enroll`, file, [...prefix, 'enroll', '--server', market.url, '--token', token], { env: childEnv });
  const code = await enroll.exited;
  if (code !== 0) throw new Error(`gf-agent enroll failed (exit ${String(code)}):\n${enroll.tail()}`);
  machineId = (JSON.parse(readFileSync(join(stateDir, 'machine.json'), 'utf8')) as { machineId: string }).machineId;
  const owner = machineId;
  // Its containers outlive a killed agent: removed even when the teardown cannot run.
  const forget = onEmergencyExit(() => {
    const ids = execFileSync('docker', ['ps', '-aq', '--filter', `label=org.gpufarm.owner=${owner}`], { encoding: 'utf8' }).split('\n').filter(Boolean);
    if (ids.length > 0) execFileSync('docker', ['rm', '-fv', ...ids], { stdio: 'ignore' });
  });
  market.cleanups.push(async () => forget());
  const agent: TestAgent = {
    name: options.name,
    machineId,
    stateDir,
    current: null,
    start(env) {
      const p = spawnProcess(options.name, file, [...prefix, 'run'], { env: { ...childEnv, ...env } });
      processes.push(p);
      market.processes.push(p);
      agent.current = p;
      return p;
    },
    async command(args) {
      const p = spawnProcess(`${options.name}-${args[0] ?? 'command'}`, file, [...prefix, ...args], { env: childEnv });
      const exit = await p.exited;
      if (exit !== 0) throw new Error(`gf-agent ${args.join(' ')} failed (exit ${String(exit)}):\n${p.tail()}`);
    },
  };
  return agent;
}

/** Removes every container the agent of `machineId` made (it leaves them running when killed). */
async function removeContainers(machineId: string): Promise<void> {
  const { stdout } = await run('docker', ['ps', '-aq', '--filter', `label=org.gpufarm.owner=${machineId}`]).catch(() => ({ stdout: '' }));
  const ids = stdout.split('\n').filter(Boolean);
  if (ids.length > 0) await run('docker', ['rm', '-fv', ...ids]).catch(() => undefined);
}

/** Unmounts the loop-mounted `/output` folders an agent left under `root`. */
export async function releaseMounts(root: string): Promise<void> {
  const mounts = readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[1] ?? '')
    .filter((point) => point.startsWith(root))
    .sort((a, b) => b.length - a.length);
  for (const point of mounts) await run('umount', ['-l', point]).catch(() => undefined);
}
