import { FailureStreak } from '../background/periodic.js';
import { FLEET_CHANGED_CHANNEL } from '../capacity/offer-index.js';
import { JOBS_QUEUED_CHANNEL } from '../jobs/channels.js';
import { matchQueuedJobs, type MatcherDeps, type MatchOptions, type MatchResult } from './matcher.js';
import type { QueueFigures } from './queue-figures.js';

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
  /** Runs a pass as soon as the current one (if any) ends. */
  wake(): void;
  /** Stops the loop and its listeners; waits for a running pass. */
  close(): Promise<void>;
}

/**
 * Runs `matchQueuedJobs` in the background. A pass runs on `wake()`, on a
 * NOTIFY of `jobs_queued`, shortly after a `fleet_changed` (GPUs freed, a machine online; the
 * fleet triggers of migration 001), right after a pass that left jobs contended, and every
 * `fullPassEvery` ticks regardless; otherwise a tick costs nothing, so a queue of jobs nothing
 * fits does not load the fleet every period. A failed pass is logged and the next one waits
 * longer each time it fails again (`FailureStreak`), until one goes through.
 */
export function startMatcher(deps: MatcherDeps, options: MatcherLoopOptions): MatcherLoop {
  const log = deps.log ?? ((message: string, err?: unknown) => console.warn(`matcher: ${message}${err instanceof Error ? `: ${err.message}` : ''}`));
  const fullPassEvery = options.fullPassEvery ?? 10;
  let closed = false;
  let dirty = true;
  /** True while fleet changes cannot be heard: every tick passes. */
  let fleetBlind = false;
  let ticks = 0;
  let running: Promise<void> | null = null;
  let again = false;
  const unlisten: Array<() => Promise<void>> = [];

  const streak = new FailureStreak('matcher pass', options.intervalMs, log);
  /** While passes fail, no pass before this time (epoch ms). */
  let retryAt = 0;

  const pass = async (): Promise<void> => {
    try {
      dirty = false;
      const started = performance.now();
      const result = await matchQueuedJobs(deps, options);
      streak.succeeded();
      if (result.contended > 0) dirty = true;
      if (result.considered > 0) {
        options.metrics?.pass((performance.now() - started) / 1000);
        for (const matched of result.matched) options.metrics?.queueWait(matched.queuedSeconds);
        options.onPass?.(result);
      }
    } catch (err) {
      dirty = true;
      retryAt = Date.now() + streak.failed(err);
    }
    await options.queue?.refresh().catch((err: unknown) => log('queue figures not refreshed', err));
  };

  const run = (): void => {
    if (closed || Date.now() < retryAt) return;
    if (running) {
      again = true;
      return;
    }
    running = pass().finally(() => {
      running = null;
      if (again && !closed) {
        again = false;
        run();
      }
    });
  };

  const wake = (): void => {
    dirty = true;
    run();
  };

  const timer = setInterval(() => {
    ticks += 1;
    if (dirty || fleetBlind || ticks % fullPassEvery === 0) run();
    else void options.queue?.refresh().catch((err: unknown) => log('queue figures not refreshed', err));
  }, options.intervalMs);
  timer.unref();

  // Reservations of the matcher itself change the fleet too: that costs one cheap extra pass.
  let fleetDebounce: NodeJS.Timeout | null = null;
  const onFleet = () => {
    if (fleetDebounce || closed) return;
    fleetDebounce = setTimeout(() => {
      fleetDebounce = null;
      dirty = true;
    }, 200);
    fleetDebounce.unref();
  };
  deps.db.listen(JOBS_QUEUED_CHANNEL, wake).then(
    (stop) => (closed ? void stop() : unlisten.push(stop)),
    (err: unknown) => log(`cannot listen on ${JOBS_QUEUED_CHANNEL}; passes run every ${options.intervalMs} ms`, err),
  );
  deps.db.listen(FLEET_CHANGED_CHANNEL, onFleet).then(
    (stop) => (closed ? void stop() : unlisten.push(stop)),
    () => {
      fleetBlind = true;
    },
  );
  run();

  return {
    wake,
    async close() {
      closed = true;
      clearInterval(timer);
      if (fleetDebounce) clearTimeout(fleetDebounce);
      await Promise.all(unlisten.map((stop) => stop().catch(() => {})));
      await running;
    },
  };
}
