/**
 * Periodic loops of the control plane (escrow worker, execution worker, liveness sweep, GPU
 * history, log partitions): a pass every period, one at a time; a failing pass is logged and
 * retried with exponential backoff, so a database or chain that is down is not hammered and
 * its errors do not flood the log, and the process stays up. They are notified loops
 * (`notified-loop.ts`) that listen on no channel.
 */
import { errorText, GpufarmError } from '@gpufarm/shared';
import type { Logger } from '../logger.js';
import { createNotifiedLoop } from './notified-loop.js';

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
  /** Runs a pass now, after the running one if any; never rejects (a failure is logged). */
  runOnce(): Promise<void>;
  /** Stops the loop; waits for a running pass. */
  close(): Promise<void>;
}

/**
 * Runs `run` every `intervalMs` (a notified loop without channels: passes never overlap, the
 * first runs after one period); after a failure the wait grows as `retryDelayMs` says.
 * `intervalMs <= 0`: no timer, passes only through `runOnce`. Its lines carry `loop: name`.
 */
export function startPeriodic(options: { name: string; intervalMs: number; run: () => Promise<void>; log: Logger; maxBackoffMs?: number }): Periodic {
  const loop = createNotifiedLoop({
    name: options.name,
    log: options.log,
    intervalMs: options.intervalMs,
    run: () => options.run(),
    ...(options.maxBackoffMs === undefined ? {} : { maxBackoffMs: options.maxBackoffMs }),
  });
  void loop.start({ firstPass: false });
  return {
    runOnce: () => loop.runNow().catch(() => {}),
    close: () => loop.close(),
  };
}
