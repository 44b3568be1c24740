import type { Queryable } from '../db/database.js';
import { countQueuedByClass } from './store.js';

/**
 * The `queue` figure of capacity offers: jobs waiting (QUEUED or MATCHING) per GPU class,
 * counted in SQL and cached, so the offer index reads it synchronously on every request.
 * The matcher loop refreshes it after each pass and on each tick.
 */
export interface QueueFigures {
  /** The last counts (empty before the first refresh). Pass to `createOfferIndex({ queuedByClass })`. */
  queuedByClass(): ReadonlyMap<string, number>;
  /** Counts again; a refresh already running is shared. Rejects when the count fails (the old counts stay). */
  refresh(): Promise<void>;
}

export function createQueueFigures(db: Queryable): QueueFigures {
  let counts: ReadonlyMap<string, number> = new Map();
  let running: Promise<void> | null = null;
  return {
    queuedByClass: () => counts,
    refresh() {
      running ??= countQueuedByClass(db)
        .then((next) => {
          counts = next;
        })
        .finally(() => {
          running = null;
        });
      return running;
    },
  };
}
