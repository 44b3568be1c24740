import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { LineTail, type ChildExit } from '@gpufarm/shared/node';
import { z } from 'zod';
import { REPO_ROOT, stopChild } from './local-agent.js';
import type { Supervised } from './supervisor.js';

const CONTROL_PLANE_MAIN = join(REPO_ROOT, 'control-plane/src/main.ts');
/** What `control-plane/src/main.ts` sends its parent once it listens. */
const listeningMessage = z.object({ type: z.literal('listening'), url: z.url(), pid: z.number().int() });

export interface ControlPlaneChild extends Supervised {
  url: string;
}

/**
 * The control plane as a child process of `npm start` (`control-plane/src/main.ts` with `env`),
 * in a process group of its own so a Ctrl-C reaches only `npm start`, which stops it in order.
 * Resolves once it listens; rejects with its last lines when it exits first or stays silent
 * for `timeoutMs`. Each line it prints goes to `log`.
 */
export function startControlPlaneChild(options: { env: NodeJS.ProcessEnv; log: (line: string) => void; timeoutMs?: number }): Promise<ControlPlaneChild> {
  const child = spawn(process.execPath, ['--import', 'tsx', CONTROL_PLANE_MAIN], {
    cwd: REPO_ROOT,
    env: options.env,
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    detached: true,
  });
  const tail = new LineTail();
  const onOutput = (chunk: Buffer) => {
    for (const line of tail.push(chunk)) if (line.trim()) options.log(line);
  };
  child.stdout!.on('data', onOutput);
  child.stderr!.on('data', onOutput);
  const exited = new Promise<ChildExit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  // However `npm start` ends (short of SIGKILL), its control plane goes with it.
  const killOnExit = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  };
  process.once('exit', killOnExit);
  void exited.then(() => process.off('exit', killOnExit));

  return new Promise<ControlPlaneChild>((resolve, reject) => {
    const timeoutMs = options.timeoutMs ?? 120_000;
    const timer = setTimeout(() => {
      void stopChild(child);
      reject(new Error(`the control plane did not listen within ${timeoutMs / 1000} s; its last lines:\n${tail.lines().join('\n')}`));
    }, timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`the control plane could not be started: ${err.message}`));
    });
    void exited.then((exit) => {
      clearTimeout(timer);
      reject(new Error(`the control plane exited (${exit.signal ? `signal ${exit.signal}` : `exit code ${String(exit.code)}`}) before it listened; its last lines:\n${tail.lines().join('\n')}`));
    });
    child.on('message', (message: unknown) => {
      const listening = listeningMessage.safeParse(message);
      if (!listening.success) return;
      clearTimeout(timer);
      resolve({ pid: child.pid!, url: listening.data.url, exited, lastLines: () => tail.lines(), stop: () => stopChild(child) });
    });
  });
}
