import { DEFAULT_MACHINE_LOST_GRACE_SECONDS, DEFAULT_MACHINE_OFFLINE_SECONDS } from '@gpufarm/shared';

/**
 * How long running jobs go on while the control plane cannot be reached, and the timer that
 * stops them. The control plane requeues a machine's jobs once it has had no heartbeat from it
 * for `lostAfterSeconds` (told in `welcome`); the agent must have stopped its containers by
 * then, or the job runs on two machines at once. So the grace is counted from the last
 * heartbeat the control plane is known to have received, and ends early enough to leave room
 * for the stop itself and for slack.
 */

/** Seconds kept in hand at least: a late timer, a busy event loop, a slow sweep of the other side's clock. */
export const PARTITION_MARGIN_SECONDS = 5;
/** The control plane's default `lostAfterSeconds`, assumed until a `welcome` says otherwise. */
export const DEFAULT_LOST_AFTER_SECONDS = DEFAULT_MACHINE_OFFLINE_SECONDS + DEFAULT_MACHINE_LOST_GRACE_SECONDS;

export interface PartitionGraceParams {
  /** The control plane's `welcome.lostAfterSeconds`. */
  lostAfterSeconds: number;
  /** Seconds between heartbeats: the grace is never under three of them. */
  heartbeatIntervalSeconds: number;
  /** Seconds a stop may take (SIGTERM, grace, SIGKILL). */
  stopSeconds: number;
  /** The operator's `partition_grace_seconds`, a cap; null: none. */
  capSeconds: number | null;
}

/**
 * The partition grace in seconds: `lostAfterSeconds` minus the stop's time and a margin (5 s or
 * 5 %, whichever is more), at most the operator's cap, and never under three heartbeat
 * intervals (as the control plane's silence limit), so a healthy link's ordinary jitter never
 * stops a job.
 *
 * @example partitionGraceSeconds({ lostAfterSeconds: 350, heartbeatIntervalSeconds: 10, stopSeconds: 10, capSeconds: null }) // 322
 */
export function partitionGraceSeconds(p: PartitionGraceParams): number {
  const margin = Math.max(PARTITION_MARGIN_SECONDS, Math.ceil(p.lostAfterSeconds / 20));
  const derived = p.lostAfterSeconds - p.stopSeconds - margin;
  const capped = p.capSeconds === null ? derived : Math.min(derived, p.capSeconds);
  return Math.max(3 * p.heartbeatIntervalSeconds, capped);
}

export interface ContactDeadlineOptions {
  graceSeconds: number;
  /** The grace (`graceSeconds`, passed) ran out without news of the control plane: stop running jobs. */
  onExpired: (graceSeconds: number) => void;
  /** News of the control plane after `onExpired`. */
  onContact: () => void;
  /** Monotonic milliseconds. */
  now?: () => number;
}

/**
 * The timer behind the grace: `heard(at)` moves its start to the send time of a message the
 * control plane is known to have received; once `graceSeconds` pass without a later one,
 * `onExpired` runs (once, until the next `heard`).
 */
export class ContactDeadline {
  private readonly now: () => number;
  private lastMs: number;
  private graceMs: number;
  private timer: NodeJS.Timeout | null = null;
  private expired = false;
  private stopped = false;

  constructor(private readonly options: ContactDeadlineOptions) {
    this.now = options.now ?? (() => performance.now());
    this.lastMs = this.now();
    this.graceMs = options.graceSeconds * 1000;
    this.arm();
  }

  get graceSeconds(): number {
    return this.graceMs / 1000;
  }

  /** The control plane received what was sent at `atMs` (monotonic) or earlier. */
  heard(atMs: number): void {
    if (atMs <= this.lastMs) return;
    this.lastMs = atMs;
    if (this.expired) {
      this.expired = false;
      this.options.onContact();
    }
    this.arm();
  }

  setGraceSeconds(seconds: number): void {
    if (seconds * 1000 === this.graceMs) return;
    this.graceMs = seconds * 1000;
    if (!this.expired) this.arm();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private arm(): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.check(), Math.max(0, this.lastMs + this.graceMs - this.now()));
  }

  private check(): void {
    this.timer = null;
    if (this.stopped || this.expired) return;
    if (this.now() - this.lastMs < this.graceMs) return this.arm();
    this.expired = true;
    this.options.onExpired(this.graceSeconds);
  }
}
