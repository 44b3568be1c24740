import { errorText } from '@gpufarm/shared';
import { describeExit, type ChildExit } from '@gpufarm/shared/node';

/** A child process `npm start` runs and watches. */
export interface Supervised {
  pid: number;
  /** Resolves when it exited, however it ended. */
  exited: Promise<ChildExit>;
  /** The last lines it printed. */
  lastLines(): string[];
  /** Stops it (SIGTERM, then SIGKILL) and resolves once it exited. */
  stop(): Promise<void>;
}

/** How a watched child is brought back; none: its exit stops everything. */
export interface RestartPolicy {
  restart: () => Promise<Supervised>;
  /** Called with the new child once it runs again. */
  onRestarted?: (child: Supervised) => void;
}

/** Runs shorter than this end a restart streak's patience: `MAX_QUICK_EXITS` of them in a row stop everything. */
export const QUICK_EXIT_MS = 60_000;
export const MAX_QUICK_EXITS = 5;

/** The wait before restart `attempt` (1, 2, …): 1 s, 2 s, 4 s … up to 30 s. */
export function restartDelayMs(attempt: number): number {
  return Math.min(30_000, 1_000 * 2 ** Math.max(0, attempt - 1));
}

/**
 * Watches the children of `npm start`: when one exits on its own it says which, how (exit code
 * or signal) and its last lines, then restarts it after a growing wait, or, for a child nothing
 * can run without (the chain), stops everything with a clear message. A child that keeps dying
 * within a minute of each start also stops everything: never a half-running marketplace.
 */
export class Supervisor {
  private readonly stops = new Map<string, () => Promise<void>>();
  private stopping = false;
  private finish: (code: number) => void = () => {};
  /** Resolves with the exit code `npm start` should end with, once everything stopped. */
  readonly done = new Promise<number>((resolve) => (this.finish = resolve));

  /** `command`: what the user runs to start again (`npm start`, `npm run cluster`). */
  constructor(
    private readonly say: (line: string) => void,
    private readonly command = 'npm start',
  ) {}

  /** Watches `child`; with a policy it is restarted when it exits, else its exit stops everything. */
  watch(name: string, child: Supervised, policy?: RestartPolicy, quickExits = 0): void {
    const startedAt = Date.now();
    this.stops.set(name, () => child.stop());
    void child.exited.then(async (exit) => {
      if (this.stopping) return;
      const lines = child.lastLines();
      this.say(`${name} (pid ${child.pid}) exited with ${describeExit(exit)}${lines.length ? '; its last lines:' : ' and printed nothing'}`);
      for (const line of lines) this.say(`  | ${line}`);
      if (!policy) return this.stopAll(`${name} is gone and nothing runs without it: stopping the marketplace. Start it again with ${this.command}.`, 1);
      let quick = Date.now() - startedAt < QUICK_EXIT_MS ? quickExits + 1 : 0;
      for (;;) {
        if (quick >= MAX_QUICK_EXITS) {
          return this.stopAll(`${name} failed ${quick} times in a row within a minute of starting: stopping the marketplace. Fix what its last lines say, then ${this.command} again.`, 1);
        }
        const delay = restartDelayMs(quick + 1);
        this.say(`restarting ${name} in ${delay / 1000} s`);
        await new Promise((resolve) => setTimeout(resolve, delay));
        if (this.stopping) return;
        try {
          const next = await policy.restart();
          if (this.stopping) return void (await next.stop());
          this.say(`${name} is running again (pid ${next.pid})`);
          policy.onRestarted?.(next);
          this.watch(name, next, policy, quick);
          return;
        } catch (err) {
          quick += 1;
          this.say(`${name} did not start again: ${errorText(err)}`);
        }
      }
    });
  }

  /** Stops every child and everything registered, last added first; `npm start` then exits with `code`. */
  async stopAll(reason: string, code: number): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.say(reason);
    for (const [name, stop] of [...this.stops].reverse()) {
      await stop().catch((err: unknown) => this.say(`while stopping ${name}: ${errorText(err)}`));
    }
    this.finish(code);
  }
}
