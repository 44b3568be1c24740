/**
 * The one notified loop of the control plane (the offer index, the matcher, and every
 * periodic loop through `startPeriodic`): a pass on a timer and on PostgreSQL notifications
 * of some channels (debounced per channel), one pass at a time, and a request during a pass
 * runs one more after it. A failed pass is logged and the timer waits longer each time it
 * fails again (`retryDelayMs`); a channel that cannot be listened on is tried again on every
 * tick, and meanwhile the passes tell their `run` so (`listening: false`): it must not count on
 * notifications.
 */
import type { Logger } from '../logger.js';

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

/** Why a pass runs: everything asked of it since the previous pass began. */
export interface PassCause {
  /** The channels notified (after their debounce). */
  notified: ReadonlySet<string>;
  /** The timer fired. */
  timer: boolean;
  /** `start()`, `runNow()` or `wake()` asked. */
  asked: boolean;
  /** Timer firings so far, this one included (the first is 1). */
  ticks: number;
  /** Every channel is listened on: a change is notified, not only found by a timer pass. */
  listening: boolean;
}

export interface NotifiedLoopOptions {
  /** The loop's name: the `loop` field of its log lines. */
  name: string;
  /** The loop's lines go to a child of it with `loop: name`. */
  log: Logger;
  /** Period of the timer; `<= 0`: no timer, passes only when asked or notified. */
  intervalMs: number;
  /** The period until a first pass succeeds, when shorter (a cache that has nothing to serve yet). */
  firstIntervalMs?: number;
  /** Longest wait of the timer after failed passes; `MAX_BACKOFF_MS` by default. */
  maxBackoffMs?: number;
  /** Where to LISTEN; needed when `channels` names any. */
  db?: { listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>> };
  /** The channels that ask for a pass, each after its debounce (0: at once). */
  channels?: Readonly<Record<string, { debounceMs: number }>>;
  /** One pass; a rejection is a failed pass. */
  run: (cause: PassCause) => Promise<void>;
  /** The message of a failed pass's line (it carries `err`, `failures` and `retryInMs` besides); default "<name> pass failed". */
  failureMessage?: () => string;
}

export interface NotifiedLoop {
  /**
   * Listens, starts the timer and runs a first pass (`firstPass: false`: the first runs at the
   * first tick); resolves when that pass ended (never rejects).
   */
  start(options?: { firstPass?: boolean }): Promise<void>;
  /** Runs a pass now (after the running one); rejects when it fails. Waits for no backoff. */
  runNow(): Promise<void>;
  /** Asks for a pass, as `runNow` does, without waiting for it; while passes fail, the next try waits for the backoff. */
  wake(): void;
  /** Every channel is listened on. */
  readonly listening: boolean;
  /** Stops the timer and the listeners, drops passes not begun, waits for a running pass. */
  close(): Promise<void>;
}

/**
 * A failing streak is logged at `warn` while its wait grows (the first failure, then each that
 * doubles the wait), and every this many failures once the wait stopped growing; the others at
 * `debug`: a database down for an hour says so a few times, not on every try.
 */
const WARN_EVERY = 10;

/** Starts nothing until `start()` (or `runNow()`/`wake()`); see `NotifiedLoop`. */
export function createNotifiedLoop(options: NotifiedLoopOptions): NotifiedLoop {
  const log = options.log.child({ loop: options.name });
  const channels = Object.entries(options.channels ?? {});
  if (channels.length > 0 && !options.db) throw new TypeError(`${options.name}: channels need a db to listen on`);
  const stops = new Map<string, () => Promise<void>>();
  const debounces = new Map<string, NodeJS.Timeout>();
  let listenFailing = false;
  let closed = false;
  let timer: NodeJS.Timeout | null = null;
  let ticks = 0;
  let failures = 0;
  let lastDelay = 0;
  let succeededOnce = false;
  /** While passes fail, notified and woken passes wait until this time (epoch ms). */
  let retryAt = 0;

  type Waiter = { resolve: () => void; reject: (err: unknown) => void };
  interface Request {
    notified: Set<string>;
    timer: boolean;
    asked: boolean;
    /** `runNow()` or the timer asked: runs even during a backoff. */
    urgent: boolean;
    waiters: Waiter[];
  }
  let pending: Request | null = null;
  let running: Promise<void> | null = null;

  const period = () => (succeededOnce || options.firstIntervalMs === undefined ? options.intervalMs : Math.min(options.intervalMs, options.firstIntervalMs));
  const armTimer = (delayMs: number) => {
    if (timer) clearTimeout(timer);
    timer = null;
    if (closed || options.intervalMs <= 0) return;
    timer = setTimeout(() => void tick(), delayMs);
    timer.unref();
  };

  const listen = async (): Promise<void> => {
    for (const [channel, { debounceMs }] of channels) {
      if (stops.has(channel) || closed) continue;
      try {
        const stop = await options.db!.listen(channel, () => notified(channel, debounceMs));
        if (closed) await stop().catch(() => {});
        else stops.set(channel, stop);
      } catch (err) {
        if (!listenFailing) log.warn({ err, channel, retryInMs: period() }, `${options.name}: cannot listen on ${channel}; passes run every tick until it can`);
        listenFailing = true;
        return;
      }
    }
    // At the outage's level, so a log read at `warn` shows where it ended.
    if (listenFailing && stops.size === channels.length) log.warn(`${options.name}: listening again`);
    listenFailing = false;
  };
  const listening = () => stops.size === channels.length;

  const notified = (channel: string, debounceMs: number) => {
    if (closed || debounces.has(channel)) return;
    if (debounceMs <= 0) return request({ notified: channel });
    const t = setTimeout(() => {
      debounces.delete(channel);
      request({ notified: channel });
    }, debounceMs);
    t.unref();
    debounces.set(channel, t);
  };

  const request = (ask: { notified?: string; timer?: boolean; asked?: boolean; waiter?: Waiter }): void => {
    if (closed) {
      ask.waiter?.resolve();
      return;
    }
    pending ??= { notified: new Set(), timer: false, asked: false, urgent: false, waiters: [] };
    if (ask.notified) pending.notified.add(ask.notified);
    if (ask.timer) pending.timer = true;
    if (ask.asked) pending.asked = true;
    if (ask.timer || ask.waiter) pending.urgent = true;
    if (ask.waiter) pending.waiters.push(ask.waiter);
    next();
  };

  /** Begins the pending pass unless one runs, or passes fail and nothing urgent waits (the timer will come). */
  const next = (): void => {
    if (running || !pending || closed) return;
    if (!pending.urgent && Date.now() < retryAt) return;
    const req = pending;
    pending = null;
    running = pass(req).finally(() => {
      running = null;
      next();
    });
  };

  const pass = async (req: Request): Promise<void> => {
    const cause: PassCause = { notified: req.notified, timer: req.timer, asked: req.asked, ticks, listening: listening() };
    try {
      await options.run(cause);
    } catch (err) {
      failures += 1;
      const delay = retryDelayMs(period(), failures, options.maxBackoffMs);
      retryAt = Date.now() + delay;
      const fields = { err, failures, retryInMs: delay };
      const message = options.failureMessage?.() ?? `${options.name} pass failed`;
      if (failures === 1 || delay > lastDelay || failures % WARN_EVERY === 0) log.warn(fields, message);
      else log.debug(fields, message);
      lastDelay = delay;
      armTimer(delay);
      for (const w of req.waiters) w.reject(err);
      return;
    }
    succeededOnce = true;
    if (failures > 0) {
      // At the failures' level, so a log read at `warn` shows where the streak ended.
      log.warn({ failures }, `${options.name} recovered after ${failures} failed passes`);
      failures = 0;
      lastDelay = 0;
      retryAt = 0;
      armTimer(period());
    } else if (req.timer) armTimer(period());
    for (const w of req.waiters) w.resolve();
  };

  const tick = async (): Promise<void> => {
    timer = null;
    ticks += 1;
    if (!listening()) await listen();
    request({ timer: true });
  };

  return {
    async start({ firstPass = true } = {}) {
      await listen();
      armTimer(period());
      if (!firstPass) return;
      await new Promise<void>((resolve) => request({ asked: true, waiter: { resolve, reject: () => resolve() } }));
    },
    runNow() {
      return new Promise<void>((resolve, reject) => request({ asked: true, waiter: { resolve, reject } }));
    },
    wake() {
      request({ asked: true });
    },
    get listening() {
      return listening();
    },
    async close() {
      closed = true;
      if (timer) clearTimeout(timer);
      timer = null;
      for (const t of debounces.values()) clearTimeout(t);
      debounces.clear();
      for (const w of pending?.waiters ?? []) w.resolve();
      pending = null;
      const unlisten = [...stops.values()];
      stops.clear();
      await Promise.all(unlisten.map((stop) => stop().catch(() => {})));
      await running;
    },
  };
}
