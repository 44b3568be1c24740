import { formatBytes } from '@gpufarm/shared';

/** One event of Docker's pull stream (`POST /images/create`). */
export interface PullEvent {
  status?: string;
  id?: string;
  progressDetail?: { current?: number; total?: number };
  error?: string;
  errorDetail?: { message?: string };
}

/** At most one progress line a second: a pull of a 30 GB image must not flood the job's log. */
export const PULL_PROGRESS_INTERVAL_MS = 1000;

interface Layer {
  /** Bytes of the compressed layer fetched so far, and its size once Docker tells it. */
  current: number;
  total: number | null;
  done: boolean;
}

/** Statuses after which a layer needs nothing more from the registry. */
const DOWNLOADED = new Set(['Download complete', 'Verifying Checksum', 'Extracting', 'Pull complete', 'Already exists']);
const DONE = new Set(['Pull complete', 'Already exists']);

/**
 * Sums a pull's stream into lines a person reads: layers done of those announced, bytes fetched of
 * those known and the rate since the pull started, at most once per `intervalMs`; `summary()` the
 * whole pull at its end. Docker reports bytes per layer (`Downloading` with `progressDetail`),
 * layer sizes only once each starts downloading, so the total grows as layers start.
 */
export class PullProgress {
  private readonly layers = new Map<string, Layer>();
  private lastReport: number;

  constructor(
    private readonly ref: string,
    private readonly startedAt: number,
    private readonly intervalMs = PULL_PROGRESS_INTERVAL_MS,
  ) {
    this.lastReport = startedAt;
  }

  /** Takes one event at `now`; answers a progress line when one is due. */
  event(event: PullEvent, now: number): string | null {
    if (event.id && event.status && this.isLayerEvent(event)) {
      const layer = this.layers.get(event.id) ?? { current: 0, total: null, done: false };
      if (event.status === 'Downloading' && event.progressDetail) {
        if (typeof event.progressDetail.current === 'number') layer.current = event.progressDetail.current;
        if (typeof event.progressDetail.total === 'number' && event.progressDetail.total > 0) layer.total = event.progressDetail.total;
      }
      // A layer the machine already holds costs nothing to fetch.
      if (event.status === 'Already exists') layer.total ??= 0;
      if (DOWNLOADED.has(event.status) && layer.total !== null) layer.current = layer.total;
      if (DONE.has(event.status)) layer.done = true;
      this.layers.set(event.id, layer);
    }
    if (now - this.lastReport < this.intervalMs) return null;
    this.lastReport = now;
    return `pulling ${this.ref}: ${this.figures(now)}`;
  }

  /** The pull as a whole, for its last line. */
  summary(now: number): string {
    return `pulled ${this.ref} in ${now - this.startedAt} ms: ${this.figures(now)}`;
  }

  // Events with an id that are not about a layer: `Pulling from <repo>` names the tag, `Digest:`/`Status:` have none.
  private isLayerEvent(event: PullEvent): boolean {
    return !event.status!.startsWith('Pulling from');
  }

  private figures(now: number): string {
    // Docker names no layer when the machine holds every one (the same image under another name).
    if (this.layers.size === 0) return 'no layer to fetch: the machine holds every one';
    let fetched = 0;
    let known = 0;
    let done = 0;
    let sized = 0;
    for (const layer of this.layers.values()) {
      fetched += layer.current;
      if (layer.total !== null) {
        known += layer.total;
        sized += 1;
      }
      if (layer.done) done += 1;
    }
    const seconds = Math.max(now - this.startedAt, 1) / 1000;
    const amount =
      sized === this.layers.size && known > 0
        ? `${formatBytes(fetched)} of ${formatBytes(known)} (${Math.floor((100 * fetched) / known)} %) fetched`
        : `${formatBytes(fetched)} fetched${known > 0 ? ` (of ${formatBytes(known)} in the layers sized so far)` : ''}`;
    return `${done} of ${this.layers.size} layers done, ${amount}, ${formatBytes(Math.round(fetched / seconds))}/s`;
  }
}
