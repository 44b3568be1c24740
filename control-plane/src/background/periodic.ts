/**
 * Background loops of the control plane (matcher, escrow worker, execution worker, liveness
 * sweep): a pass every period, one at a time; a failing pass is logged and retried with
 * exponential backoff, so a database or chain that is down is not hammered and its errors do
 * not flood the log, and the process stays up.
 */
import { errorText, GpufarmError } from '@gpufarm/shared';

/** Longest wait between two tries of a failing loop. */
export const MAX_BACKOFF_MS = 60_000;

/**
 * The wait before the next pass after `failures` failed passes in a row: the period when none
 * failed, then twice the period, four times, … up to `maxMs` (never below the period).
 */
export function retryDelayMs(intervalMs: number, failures: number, maxMs = MAX_BACKOFF_MS): number {
  if (failures <= 0) return intervalMs;
  return Math.max(intervalMs, Math.min(maxMs, intervalMs * 2 ** Math.min(failures, 30)));
}

/** Counts failed passes in a row and says so: a failure with the next try, a recovery once. */
export class FailureStreak {
  private failures = 0;

  constructor(
    private readonly name: string,
    private readonly intervalMs: number,
    private readonly log: (message: string, err?: unknown) => void,
    private readonly maxMs = MAX_BACKOFF_MS,
  ) {}

  /** Records a failed pass; answers the wait before the next try. */
  failed(err: unknown): number {
    this.failures += 1;
    const delay = retryDelayMs(this.intervalMs, this.failures, this.maxMs);
    this.log(`${this.name} failed (${this.failures} in a row); next try in ${delay} ms`, err);
    return delay;
  }

  /** Records a pass that went through. */
  succeeded(): void {
    if (this.failures > 0) this.log(`${this.name} recovered after ${this.failures} failed passes`);
    this.failures = 0;
  }
}

/** Thrown by `runSteps` when some of its steps failed: names each, keeps their errors. */
export class StepsFailedError extends GpufarmError<'steps_failed'> {
  constructor(readonly failed: Array<{ name: string; error: unknown }>) {
    super(
      'steps_failed',
      failed.map((f) => `${f.name}: ${errorText(f.error)}`).join('; '),
      { cause: new AggregateError(failed.map((f) => f.error)) },
    );
  }
}

/** Runs every step even when one fails; throws a `StepsFailedError` naming the ones that did. */
export async function runSteps(steps: ReadonlyArray<readonly [name: string, step: () => Promise<unknown>]>): Promise<void> {
  const failed: Array<{ name: string; error: unknown }> = [];
  for (const [name, step] of steps) {
    try {
      await step();
    } catch (error) {
      failed.push({ name, error });
    }
  }
  if (failed.length > 0) throw new StepsFailedError(failed);
}

export interface Periodic {
  /** Runs a pass now, or joins the one running. */
  runOnce(): Promise<void>;
  /** Stops the loop; waits for a running pass. */
  close(): Promise<void>;
}

/**
 * Runs `run` every `intervalMs` (the next pass is scheduled when one ends, so passes never
 * overlap); after a failure the wait grows as `retryDelayMs` says. `intervalMs <= 0`: no timer,
 * passes only through `runOnce`.
 */
export function startPeriodic(options: {
  name: string;
  intervalMs: number;
  run: () => Promise<void>;
  log: (message: string, err?: unknown) => void;
  maxBackoffMs?: number;
}): Periodic {
  const streak = new FailureStreak(options.name, options.intervalMs, options.log, options.maxBackoffMs);
  let closed = false;
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  const pass = async (): Promise<number> => {
    try {
      await options.run();
      streak.succeeded();
      return options.intervalMs;
    } catch (err) {
      return streak.failed(err);
    }
  };
  const schedule = (delayMs: number) => {
    if (closed || options.intervalMs <= 0) return;
    timer = setTimeout(() => void runPass(), delayMs);
    timer.unref();
  };
  const runPass = (): Promise<void> => {
    if (timer) clearTimeout(timer);
    running ??= pass().then((next) => {
      running = null;
      schedule(next);
    });
    return running;
  };
  schedule(options.intervalMs);
  return {
    runOnce: runPass,
    async close() {
      closed = true;
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}
