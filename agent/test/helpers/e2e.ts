import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Test } from 'tap';
import { jsonLogLines, type AssignmentSpec, type JsonLogLine, type LogBatchLine } from '@gpufarm/shared';
import { readMachineFile } from '../../src/config/state.js';
import { gfAgent } from './cli.js';
import { busyboxSpec, cleanOwner, docker } from './docker.js';
import { TestPeer, type PeerOptions } from './peer.js';
import { LABEL_ASSIGNMENT, LABEL_OWNER } from '../../src/docker/labels.js';
import { testCommand } from '@gpufarm/shared/build/test-bundles';

const [NODE, ...GF_AGENT] = testCommand('agent');

/** One `gf-agent run` child process. */
export interface AgentProcess {
  child: ChildProcess;
  /** Everything it printed so far (stdout and stderr). */
  output(): string;
  /** Its log so far: the JSON lines on its stdout, parsed. */
  lines(): JsonLogLine[];
  /** The messages of `lines()`. */
  messages(): string[];
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
}

/** An enrolled agent of its own (state dir, machine id, owner label) against a test peer. */
export interface E2eAgent {
  peer: TestPeer;
  machineId: string;
  stateDir: string;
  workDir: string;
  env: Record<string, string>;
  /** Starts `gf-agent run` (killed with SIGKILL in teardown if still running). */
  start(): AgentProcess;
  /** The agent's container of an assignment, if any. */
  container(assignmentId: string): Promise<{ id: string; state: string } | null>;
}

/**
 * A test peer, and an agent enrolled with it through the real `gf-agent enroll`, in simulated
 * mode (one L4: containers get no GPUs), with a fast reconnect. Teardown kills the agent
 * processes, removes every container labelled with its machine id, unmounts its /output mounts
 * and deletes its folders, then closes the peer. `peerOptions` set the peer's (its protocol
 * versions, say).
 */
export async function e2eAgent(t: Test, settings: Record<string, string> = {}, peerOptions: Omit<PeerOptions, 'enrollmentTokens'> = {}): Promise<E2eAgent> {
  const token = `gfe_${randomBytes(32).toString('base64url')}`;
  const peer = await TestPeer.start({ heartbeatIntervalSeconds: 1, ...peerOptions, enrollmentTokens: [token] });
  const root = mkdtempSync(join(tmpdir(), 'gf-e2e-'));
  const stateDir = join(root, 'state');
  const workDir = join(root, 'work');
  const env = {
    GF_AGENT_STATE_DIR: stateDir,
    GF_AGENT_WORK_DIR: workDir,
    GF_AGENT_SIMULATE_GPUS: '1x l4-24gb',
    GF_AGENT_RECONNECT_INITIAL_MS: '50',
    GF_AGENT_RECONNECT_MAX_MS: '500',
    GF_AGENT_MIN_FREE_DISK_BYTES: '0',
    // Several agents share this host: none takes the default metrics port unless a test asks.
    GF_AGENT_METRICS_LISTEN: 'off',
    ...settings,
  };
  const children: AgentProcess[] = [];
  let machineId: string | null = null;
  t.teardown(async () => {
    for (const p of children) {
      if (p.child.exitCode === null && p.child.signalCode === null) {
        p.child.kill('SIGKILL');
        await p.exited;
      }
    }
    if (machineId) await cleanOwner(machineId, workDir);
    rmSync(root, { recursive: true, force: true });
    await peer.close();
  });
  const enrolled = await gfAgent(['enroll', '--server', peer.url, '--token', token], env);
  if (enrolled.code !== 0) throw new Error(`gf-agent enroll failed: ${enrolled.stderr}`);
  machineId = readMachineFile(stateDir)!.machineId;
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GF_AGENT_')));
  return {
    peer,
    machineId,
    stateDir,
    workDir,
    env,
    start: () => {
      const child = spawn(NODE, [...GF_AGENT, 'run'], { env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      let stdout = '';
      child.stdout!.on('data', (d: Buffer) => {
        output += d.toString();
        stdout += d.toString();
      });
      child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      const lines = () => jsonLogLines(stdout);
      const p = { child, output: () => output, lines, messages: () => lines().map((l) => l.msg), exited };
      children.push(p);
      return p;
    },
    container: async (assignmentId) => {
      const [c] = await docker.listContainers({ all: true, filters: { label: [`${LABEL_OWNER}=${machineId}`, `${LABEL_ASSIGNMENT}=${assignmentId}`] } });
      return c ? { id: c.Id, state: c.State } : null;
    },
  };
}

/** Polls `check` until it holds (state outside the peer: Docker, files). */
export async function until(check: () => Promise<boolean> | boolean, label: string, timeoutMs = 60_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${label}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const run = promisify(execFile);

/** `sha256sum` of bytes (a hash computed outside the agent's code and the peer's). */
export async function sha256sum(bytes: Buffer): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'gf-sum-'));
  try {
    writeFileSync(join(dir, 'blob'), bytes);
    const { stdout } = await run('sha256sum', [join(dir, 'blob')]);
    return stdout.slice(0, 64);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The names in a tar and the text of one member, read with the system's `tar`. */
export async function untar(bytes: Buffer, member: string): Promise<{ names: string[]; text: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'gf-untar-'));
  try {
    writeFileSync(join(dir, 'a.tar'), bytes);
    const { stdout: listing } = await run('tar', ['-tf', join(dir, 'a.tar')]);
    const { stdout: text } = await run('tar', ['-xOf', join(dir, 'a.tar'), member]);
    return { names: listing.trim().split('\n'), text };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The simulated GPU of an `e2eAgent` machine. */
export const GPU = { index: 0, uuid: 'GPU-sim-l4-24gb-0' };

/** A script printing `count` numbered lines on stdout and on stderr, `pause` µs apart. */
export const numbered = (count: number, pause = 0) =>
  `i=0; while [ $i -lt ${count} ]; do echo out-$i; echo err-$i >&2; i=$((i+1)); ${pause > 0 ? `usleep ${pause}; ` : ''}done`;
/** `prefix-0` … `prefix-(count-1)`. */
export const expected = (prefix: string, count: number) => Array.from({ length: count }, (_, i) => `${prefix}-${i}`);

/** A busybox assignment pinned by digest, on the simulated GPU. */
export function spec(overrides: Partial<AssignmentSpec>): AssignmentSpec {
  return busyboxSpec({ gpus: [GPU], ...overrides });
}

/** The assignment's final status (`finished` or `failed`), once the peer has it and every log line up to its lastLogSeq. */
export async function finished(agent: E2eAgent, assignmentId: string, timeoutMs = 90_000) {
  const { peer } = agent;
  const final = () => peer.statuses(assignmentId).find((m) => m.state === 'finished' || m.state === 'failed');
  await peer.waitFor(() => {
    const f = final();
    return f !== undefined && (peer.lines.get(assignmentId)?.length ?? 0) === (f.lastLogSeq ?? -1) + 1;
  }, `${assignmentId} finished with all its lines`, timeoutMs);
  return final()!;
}

/** The texts of one stream's lines. */
export const of = (lines: LogBatchLine[], stream: string) => lines.filter((l) => l.stream === stream).map((l) => l.line);

/** Every stored line has the seq of its position (no gap, none twice) and nothing came back different. */
export function checkNumbering(t: Test, agent: E2eAgent, assignmentId: string): LogBatchLine[] {
  const lines = agent.peer.lines.get(assignmentId) ?? [];
  t.same(lines.map((l) => l.seq), lines.map((_, i) => i), 'seqs 0..n-1, each once');
  t.equal(agent.peer.gaps, 0, 'no batch skipped a seq');
  t.same(agent.peer.conflicts, [], 'a line sent again carried the same stream and text');
  t.same(agent.peer.invalid, [], 'every message passed its schema');
  return lines;
}

