import { createNotifiedLoop } from '../background/notified-loop.js';
import { FLEET_CHANGED_CHANNEL } from '../capacity/offer-index.js';
import { JOBS_QUEUED_CHANNEL } from '../jobs/channels.js';
import { matchQueuedJobs, type MatcherDeps, type MatchOptions, type MatchResult } from './matcher.js';
import type { QueueFigures } from './queue-figures.js';
import { silentLogger } from '../logger.js';

/** The matchers wake on `jobs_queued` (raised by fund-confirm and every requeue, `jobs/channels.ts`). */
export { JOBS_QUEUED_CHANNEL };

export interface MatcherLoopOptions extends MatchOptions {
  /** Period of the loop. A pass runs on a tick only when something may have changed (see below). */
  intervalMs: number;
  /** Every this many ticks a pass runs even when nothing was notified. Default 10. */
  fullPassEvery?: number;
  /** Refreshed after every pass and on every tick. */
  queue?: QueueFigures;
  /** Called after each pass that looked at jobs (tests). */
  onPass?: (result: MatchResult) => void;
  /** Where pass durations and queue waits are recorded (`metrics/`). */
  metrics?: MatcherMetrics;
}

/** The matcher's measurements: the metrics port `startMatcher` reports to. */
export interface MatcherMetrics {
  /** A pass that looked at jobs took this long. */
  pass(seconds: number): void;
  /** A matched job had waited this long in QUEUED. */
  queueWait(seconds: number): void;
}

export interface MatcherLoop {
  /** Runs a pass as soon as the current one (if any) ends; while passes fail, at the next try. */
  wake(): void;
  /** Stops the loop and its listeners; waits for a running pass. */
  close(): Promise<void>;
}

/**
 * Runs `matchQueuedJobs` in the background (a notified loop, `background/notified-loop.ts`).
 * A pass runs at start, on `wake()`, on a NOTIFY of `jobs_queued`, 200 ms after a burst of
 * `fleet_changed` (GPUs freed, a machine online; the fleet triggers of migration 001), at the
 * tick after a pass that left jobs contended or failed, on every tick while a channel cannot be
 * listened on, and every `fullPassEvery` ticks regardless; otherwise a tick only refreshes the
 * queue figures, so a queue of jobs nothing fits does not load the fleet every period. A failed
 * pass is logged (`loop: 'matcher'`, `err`) and the next one waits longer each time it fails
 * again, until one goes through.
 */
export function startMatcher(deps: MatcherDeps, options: MatcherLoopOptions): MatcherLoop {
  const log = deps.log ?? silentLogger;
  // The pass's own lines (a job not matched) say which loop they come from, as the loop's do.
  const passDeps: MatcherDeps = { ...deps, log: log.child({ loop: 'matcher' }) };
  const fullPassEvery = options.fullPassEvery ?? 10;
  /** A pass is due at the next tick: the last one left jobs contended, or failed. */
  let dirty = false;
  const refreshQueue = () => options.queue?.refresh().catch((err: unknown) => log.warn({ loop: 'matcher', err }, 'matcher: queue figures not refreshed'));

  const pass = async (): Promise<void> => {
    dirty = false;
    try {
      const started = performance.now();
      const result = await matchQueuedJobs(passDeps, options);
      if (result.contended > 0) dirty = true;
      if (result.considered > 0) {
        options.metrics?.pass((performance.now() - started) / 1000);
        for (const matched of result.matched) options.metrics?.queueWait(matched.queuedSeconds);
        options.onPass?.(result);
      }
    } catch (err) {
      dirty = true;
      throw err;
    } finally {
      await refreshQueue();
    }
  };

  // Reservations of the matcher itself change the fleet too: that costs one cheap extra pass.
  const loop = createNotifiedLoop({
    name: 'matcher',
    log,
    intervalMs: options.intervalMs,
    db: deps.db,
    channels: { [JOBS_QUEUED_CHANNEL]: { debounceMs: 0 }, [FLEET_CHANGED_CHANNEL]: { debounceMs: 200 } },
    run: async (cause) => {
      const due = cause.asked || cause.notified.size > 0 || dirty || !cause.listening || (cause.timer && cause.ticks % fullPassEvery === 0);
      if (due) await pass();
      else await refreshQueue();
    },
  });
  void loop.start();

  return { wake: () => loop.wake(), close: () => loop.close() };
}
