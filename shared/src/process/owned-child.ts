import type { ChildProcess } from 'node:child_process';
import type { ChildExit } from './line-tail.js';

/** A child process this one started and answers for: it ends with its parent. */
export interface OwnedChild {
  /** Resolves once the child exited, or with `code: null, signal: null` when it could not be spawned. */
  exited: Promise<ChildExit>;
  /** Whether it is still running (false once it exited or failed to spawn). */
  running(): boolean;
  /** SIGTERM to its pid when it still runs; resolves once it exited. */
  stop(): Promise<void>;
}

/**
 * Watches `child`: `exited` settles on 'exit' and on 'error' (a spawn failure emits only
 * 'error', and an unhandled 'error' would throw), and the child gets SIGTERM however this
 * process ends short of SIGKILL.
 */
export function ownChild(child: ChildProcess): OwnedChild {
  let ended = false;
  const exited = new Promise<ChildExit>((resolve) => {
    child.once('exit', (code, signal) => {
      ended = true;
      resolve({ code, signal });
    });
    child.on('error', () => {
      if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) return;
      ended = true;
      resolve({ code: null, signal: null });
    });
  });
  const running = () => !ended && child.exitCode === null && child.signalCode === null;
  const killOnExit = () => {
    if (running()) child.kill('SIGTERM');
  };
  process.once('exit', killOnExit);
  void exited.then(() => process.off('exit', killOnExit));
  return {
    exited,
    running,
    async stop() {
      killOnExit();
      await exited;
    },
  };
}
