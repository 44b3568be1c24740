import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { onEmergencyExit } from '@gpufarm/shared/build/emergency-exit';

export { onEmergencyExit };

/** Set `GF_E2E_VERBOSE=1` to see every child's output live, each line prefixed with its name. */
const VERBOSE = process.env.GF_E2E_VERBOSE === '1' || process.env.GF_E2E_VERBOSE === 'true';

/** One child process of a test: its output kept in memory, stopped by its own pid. */
export interface TestProcess {
  name: string;
  child: ChildProcess;
  pid: number;
  /** Everything it printed so far, stdout and stderr interleaved as received. */
  output(): string;
  /** The last `lines` lines of its output, each prefixed with its name. */
  tail(lines?: number): string;
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  running(): boolean;
  /** Waits until its output matches, failing with its output's tail when it exits or the time runs out. */
  waitForOutput(pattern: RegExp, what: string, timeoutMs?: number): Promise<RegExpExecArray>;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when it has exited. */
  stop(graceMs?: number): Promise<void>;
  /** SIGKILL at once; resolves when it has exited. */
  kill(): Promise<void>;
}

/**
 * Spawns `command args` with exactly `env` over this process's environment, keeps its output,
 * and returns a handle that stops it by its pid (never by name).
 */
export function spawnProcess(
  name: string,
  command: string,
  args: string[],
  options: {
    env?: Record<string, string | undefined>;
    cwd?: string;
    /** In a process group of its own, which every signal (stop, kill) reaches whole, as `timeout` or a CI runner sends them. */
    processGroup?: boolean;
  } = {},
): TestProcess {
  const child = spawn(command, args, { cwd: options.cwd, env: { ...process.env, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'], detached: options.processGroup ?? false });
  if (child.pid === undefined) throw new Error(`${name}: could not start ${command}`);
  let output = '';
  let partial = '';
  const onData = (chunk: Buffer) => {
    const text = chunk.toString();
    output += text;
    if (VERBOSE) {
      partial += text;
      const lines = partial.split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) process.stderr.write(`[${name}] ${line}\n`);
    }
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const pid = child.pid;
  const target = options.processGroup ? -pid : pid;
  const forget = onEmergencyExit(() => process.kill(target, 'SIGKILL'));
  child.once('exit', forget);
  const exited = new Promise<number | null>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
    else child.once('exit', (code) => resolve(code));
  });
  const running = () => child.exitCode === null && child.signalCode === null;
  const tail = (lines = 40) =>
    output
      .trimEnd()
      .split('\n')
      .slice(-lines)
      .map((l) => `  [${name}] ${l}`)
      .join('\n');
  const signal = async (sig: NodeJS.Signals) => {
    if (!running()) return;
    try {
      process.kill(target, sig);
    } catch {
      // already gone
    }
  };
  return {
    name,
    child,
    pid: child.pid,
    output: () => output,
    tail,
    exited,
    running,
    async waitForOutput(pattern, what, timeoutMs = 60_000) {
      const end = Date.now() + timeoutMs;
      for (;;) {
        const match = pattern.exec(output);
        if (match) return match;
        if (!running()) throw new Error(`${name} exited (code ${String(child.exitCode)}, signal ${String(child.signalCode)}) before ${what}:\n${tail()}`);
        if (Date.now() > end) throw new Error(`${name}: no ${what} within ${timeoutMs / 1000} s:\n${tail()}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async stop(graceMs = 10_000) {
      if (!running()) return;
      await signal('SIGTERM');
      const timer = setTimeout(() => void signal('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
    async kill() {
      if (!running()) return;
      await signal('SIGKILL');
      await exited;
    },
  };
}

/** Waits for `child` to exit, at most `timeoutMs`; true when it did. */
export async function exitedWithin(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return true;
  const timer = new Promise<false>((r) => setTimeout(() => r(false), timeoutMs).unref());
  return Promise.race([once(child, 'exit').then(() => true as const), timer]);
}

/** Whether a process with this pid exists (signal 0 probes without sending anything). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Sends `signal` to `pid` only while it is still the process `expected` describes (its command
 * line matches): a pid read from a program's output may have exited since, and pids wrap at 32768
 * here within minutes of a busy run, so a signal to a reused pid would hit another test's process.
 * Throws, signalling nothing, when the pid is gone or is another program now.
 */
export function signalIfStill(pid: number, expected: RegExp, signal: NodeJS.Signals = 'SIGKILL'): void {
  let commandLine: string;
  try {
    commandLine = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
  } catch {
    throw new Error(`pid ${pid} is gone: not signalled`);
  }
  if (!expected.test(commandLine)) throw new Error(`pid ${pid} is now "${commandLine.slice(0, 200)}", not ${expected}: not signalled`);
  process.kill(pid, signal);
}
