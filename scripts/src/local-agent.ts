import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { errorText, formatJsonLogLine, parseJsonLogLine } from '@gpufarm/shared';
import { LineTail, systemEnvironment, type ChildExit } from '@gpufarm/shared/node';
import { scriptsEnv } from './env.js';
import type { Supervised } from './supervisor.js';

/** The repository's root and the `gf-agent` command inside it. */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
const GF_AGENT = join(REPO_ROOT, 'agent/bin/gf-agent.js');

/** The local farm `npm start` enrolls its agent into. */
export const LOCAL_FARM = { slug: 'local', name: 'Local Farm', region: 'europe-west', priceUsd: '0.50' } as const;
/** Simulated GPUs of the local agent on a machine without `nvidia-smi` (`GF_LOCAL_AGENT_GPUS` overrides). */
export const LOCAL_SIMULATED_GPUS = '1x rtx-4090-24gb';

/** `.gpufarm/images.json` (scripts/build-images.sh): the local registry's images, pinned by digest. */
export interface LocalImages {
  registry: string;
  images: Record<'canary' | 'busybox' | 'egress-proxy', { repository: string; digest: string; reference: string }>;
}

export const IMAGES_FILE = join(REPO_ROOT, '.gpufarm/images.json');

export function readLocalImages(): LocalImages | null {
  if (!existsSync(IMAGES_FILE)) return null;
  try {
    return JSON.parse(readFileSync(IMAGES_FILE, 'utf8')) as LocalImages;
  } catch {
    return null;
  }
}

/**
 * Runs `scripts/<name>` with the system's basics and GF_LOCAL_REGISTRY, each line of its output
 * through `log`. Resolves with its exit code and its last three lines.
 */
function runScript(name: string, log: (line: string) => void): Promise<{ code: number | null; last: string }> {
  return new Promise((resolve, reject) => {
    const registry = scriptsEnv().GF_LOCAL_REGISTRY;
    const env = { ...systemEnvironment(), ...(registry ? { GF_LOCAL_REGISTRY: registry } : {}) };
    const child = spawn('bash', [join(REPO_ROOT, 'scripts', name)], { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const tail = new LineTail();
    const onData = (chunk: Buffer) => {
      for (const line of tail.push(chunk)) if (line.trim()) log(line);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('error', (err) => reject(err));
    child.once('close', (code) => {
      // A last line without its newline.
      onData(Buffer.from('\n'));
      resolve({ code, last: tail.lines().slice(-3).join('\n') });
    });
  });
}

/**
 * Runs `scripts/prepare-docker.sh`: Docker Engine and the local registry answer when it exits 0
 * (as root it installs and starts them); otherwise it throws with the script's last words,
 * which say what to run.
 */
export async function prepareDocker(log: (line: string) => void): Promise<void> {
  const { code, last } = await runScript('prepare-docker.sh', log);
  if (code !== 0) throw new Error(last || `prepare-docker.sh exited with ${String(code)}`);
}

/**
 * Runs `scripts/build-images.sh` (nothing to do when the images are up to date). Resolves with
 * the images, or throws with the script's last words.
 */
export async function ensureImages(log: (line: string) => void): Promise<LocalImages> {
  const { code, last } = await runScript('build-images.sh', log);
  const images = readLocalImages();
  if (code === 0 && images) return images;
  throw new Error(last || `build-images.sh exited with ${String(code)}`);
}

/**
 * What `npm start` and `npm run cluster` need for local agents: Docker Engine and the local registry
 * (`scripts/prepare-docker.sh`, as `npm test` prepares them) and the images
 * (`scripts/build-images.sh`, nothing to do when up to date). Resolves with the images, or with
 * the reason no agent can run (ending with "run `command` again").
 */
export async function prepareAgentImages(say: (line: string) => void, command = 'npm start'): Promise<{ images: LocalImages | null; problem: string | null }> {
  if (!scriptsEnv().GF_LOCAL_AGENT) return { images: null, problem: 'GF_LOCAL_AGENT=0: no local agent' };
  say('preparing Docker Engine and the local registry (scripts/prepare-docker.sh)');
  try {
    await prepareDocker((line) => say(line));
  } catch (err) {
    return { images: null, problem: `Docker Engine or the local registry is not ready, so no local agent runs: jobs are accepted and funded but stay QUEUED.\n${errorText(err)}\nOnce that is done, run ${command} again.` };
  }
  say('checking the local images (scripts/build-images.sh; it builds them only when missing or stale)');
  try {
    return { images: await ensureImages((line) => say(line)), problem: null };
  } catch (err) {
    return { images: null, problem: `the images could not be built: ${errorText(err)}` };
  }
}

/** Real GPUs when `nvidia-smi` answers, simulated ones otherwise; `GF_LOCAL_AGENT_GPUS` decides when set (`real`, or a spec such as `2x l4-24gb`). */
export function localGpus(): string | null {
  const set = scriptsEnv().GF_LOCAL_AGENT_GPUS;
  if (set === 'real') return null;
  if (set) return set;
  return spawnSync('nvidia-smi', ['-L'], { encoding: 'utf8' }).status === 0 ? null : LOCAL_SIMULATED_GPUS;
}

export interface LocalAgentOptions {
  /** The control plane's URL. */
  server: string;
  adminToken: string;
  /** The agent's state folder (machine token, key, work folders), such as `.gpufarm/agent`. */
  stateDir: string;
  /** The farm's payout address (the escrow's provider). */
  payout: string;
  /** Simulated GPUs (`1x rtx-4090-24gb`), or null for the machine's real GPUs. */
  simulateGpus: string | null;
  /** The egress proxy image, pinned, so allowlist jobs can run. */
  egressProxyImage: string | null;
  /** Where its Prometheus `/metrics` listens (`host:port` or `off`); default the agent's own. */
  metricsListen?: string;
  /** Each line the agent prints. */
  log: (line: string) => void;
}

export interface LocalAgent extends Supervised {
  machineId: string;
  /** True when this start enrolled the machine (false: the enrollment in the state folder was reused). */
  enrolled: boolean;
}

/**
 * The local agent's environment: the system's basics (`systemEnvironment`), never the control
 * plane's secrets (the admin token, the chain operator's key) that `npm start` holds, and the
 * GF_AGENT_* settings it reads.
 */
function agentEnv(options: LocalAgentOptions, from: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return {
    ...systemEnvironment(from),
    GF_AGENT_STATE_DIR: options.stateDir,
    GF_AGENT_SIMULATE_GPUS: options.simulateGpus ?? '',
    ...(options.metricsListen ? { GF_AGENT_METRICS_LISTEN: options.metricsListen } : {}),
    // A development machine rarely has the 20 GiB free a production agent insists on.
    GF_AGENT_MIN_FREE_DISK_BYTES: from.GF_AGENT_MIN_FREE_DISK_BYTES ?? String(1024 ** 3),
    ...(options.egressProxyImage ? { GF_AGENT_EGRESS_PROXY_IMAGE: options.egressProxyImage } : {}),
  };
}

function machineFile(stateDir: string): { machineId: string; server: string } | null {
  try {
    return JSON.parse(readFileSync(join(stateDir, 'machine.json'), 'utf8')) as { machineId: string; server: string };
  } catch {
    return null;
  }
}

/** A one-time enrollment token for the local farm, from the running control plane's admin API. */
async function enrollmentToken(options: LocalAgentOptions): Promise<string> {
  const res = await fetch(`${options.server}/admin/v1/enrollment-tokens`, {
    method: 'POST',
    headers: { authorization: `Bearer ${options.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ farm: LOCAL_FARM.slug, farmName: LOCAL_FARM.name, regionKey: LOCAL_FARM.region, pricePerGpuHour: LOCAL_FARM.priceUsd, payoutAddress: options.payout, label: 'npm start' }),
  });
  const body = (await res.json()) as { token?: string; error?: { code: string; message: string } };
  if (res.status !== 201 || !body.token) throw new Error(`the control plane refused an enrollment token (${res.status}): ${body.error?.message ?? JSON.stringify(body)}`);
  return body.token;
}

function runCommand(args: string[], options: LocalAgentOptions): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [GF_AGENT, ...args], { cwd: REPO_ROOT, env: agentEnv(options), stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, output }));
  });
}

async function enroll(options: LocalAgentOptions): Promise<string> {
  const token = await enrollmentToken(options);
  const { code, output } = await runCommand(['enroll', '--server', options.server, '--token', token, '--force'], options);
  for (const line of output.trim().split('\n')) if (line) options.log(line);
  const machine = machineFile(options.stateDir);
  if (code !== 0 || !machine) throw new Error(`gf-agent enroll failed (exit ${String(code)}): ${output.trim().split('\n').slice(-2).join(' ')}`);
  return machine.machineId;
}

/**
 * `gf-agent run` as a child (in a process group of its own: a Ctrl-C reaches only `npm start`,
 * which stops it), and how its link first went: up, refused (unknown machine), exited or still
 * nothing after 30 s.
 */
function spawnRun(options: LocalAgentOptions): { child: ChildProcess; tail: LineTail; exited: Promise<ChildExit>; link: Promise<'up' | 'refused' | 'exited' | 'silent'> } {
  const child = spawn(process.execPath, [GF_AGENT, 'run'], { cwd: REPO_ROOT, env: agentEnv(options), stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const exited = new Promise<ChildExit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  let settle: (state: 'up' | 'refused' | 'exited' | 'silent') => void = () => {};
  const link = new Promise<'up' | 'refused' | 'exited' | 'silent'>((resolve) => (settle = resolve));
  const timer = setTimeout(() => settle('silent'), 30_000);
  const tail = new LineTail();
  const onOutput = (chunk: Buffer) => {
    for (const line of tail.push(chunk)) {
      // The agent logs JSON lines (for journald); a person at `npm start` reads them as text.
      const logged = parseJsonLogLine(line);
      options.log(logged ? formatJsonLogLine(logged) : line);
      if (logged?.msg.startsWith('link up: ')) settle('up');
      else if (logged?.msg.startsWith('link refused: ')) settle('refused');
    }
  };
  child.stdout!.on('data', onOutput);
  child.stderr!.on('data', onOutput);
  void exited.then(() => settle('exited'));
  void link.then(() => clearTimeout(timer));
  return { child, tail, exited, link };
}

/** An agent's JSON log line as a person reads it; any other line as it is. */
function readable(line: string): string {
  const logged = parseJsonLogLine(line);
  return logged ? formatJsonLogLine(logged) : line;
}

/** SIGTERM to `child`'s pid, SIGKILL after 10 s; resolves once it exited. */
export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

/**
 * The local agent of `npm start`: enrolls it in the local farm (once; the enrollment in
 * `stateDir` is reused while it names the same server), then runs `gf-agent run` as a child
 * process and waits for its link. An enrollment the control plane refuses (a fresh database)
 * is replaced by a new one.
 */
export async function startLocalAgent(options: LocalAgentOptions): Promise<LocalAgent> {
  let enrolled = false;
  let machine = machineFile(options.stateDir);
  if (!machine || machine.server.replace(/\/$/, '') !== options.server.replace(/\/$/, '')) {
    machine = { machineId: await enroll(options), server: options.server };
    enrolled = true;
  }
  let run = spawnRun(options);
  let state = await run.link;
  if (state === 'refused' && !enrolled) {
    await stopChild(run.child);
    options.log('the saved enrollment was refused (a new database?); enrolling this machine again');
    machine = { machineId: await enroll(options), server: options.server };
    enrolled = true;
    run = spawnRun(options);
    state = await run.link;
  }
  if (state !== 'up') {
    await stopChild(run.child);
    throw new Error(state === 'exited' ? 'gf-agent run exited before its link came up' : state === 'refused' ? 'the control plane refused the agent' : 'the agent did not connect within 30 s');
  }
  const { child: current, tail, exited } = run;
  const killOnExit = () => {
    if (current.exitCode === null && current.signalCode === null) current.kill('SIGTERM');
  };
  process.once('exit', killOnExit);
  // An agent that died and is started again registers its own: forget this one once it exited.
  void exited.then(() => process.off('exit', killOnExit));
  return {
    machineId: machine.machineId,
    pid: current.pid!,
    enrolled,
    exited,
    lastLines: () => tail.lines().map(readable),
    stop: () => stopChild(current),
  };
}
