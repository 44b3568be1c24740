import { ApiError, type CapacityOffer } from '@gpufarm/shared';
import type { Database } from '../db/database.js';
import { offerJson, queryOffers, toCapacityOffer } from './offers.js';
import { DEFAULT_CAPACITY_QUERY, type CapacityQuery } from './query.js';
import { buildSnapshot, type FleetSupply, type Snapshot } from './snapshot.js';
import { loadFleetRows } from './store.js';

/** The channel the fleet tables' triggers notify (migration 001). */
export const FLEET_CHANGED_CHANNEL = 'fleet_changed';

export interface OfferIndexOptions {
  /** Full reload period, which also keeps the 30-day uptimes current. */
  refreshMs: number;
  /** The clock; uptimes are computed as of `now()`. */
  now?: () => Date;
  /** Jobs waiting per GPU class id, shown as each offer's `queue`; none by default. */
  queuedByClass?: () => ReadonlyMap<string, number>;
  /** Delay between a `fleet_changed` notification and the reload it triggers; 200 ms by default. */
  debounceMs?: number;
  /**
   * Reports a failed reload and the recovery after it (once each, not on every retry). The
   * message holds an error code or message, never connection details. Default: console.warn.
   */
  onWarning?: (message: string) => void;
}

/** A page of `GET /v1/capacity`. */
export interface OfferListPage {
  data: CapacityOffer[];
  nextCursor: string | null;
}

/** The same page with `data` already serialized as a JSON array. */
export interface OfferListJsonPage {
  dataJson: string;
  nextCursor: string | null;
}

/**
 * The in-process offer index: an in-memory snapshot of every offered machine, reloaded after
 * the fleet tables change (LISTEN `fleet_changed`, debounced) and every `refreshMs`, and
 * queried synchronously by the capacity and pricing routes. Each replica keeps its own.
 *
 * Queries before the first successful load throw `ApiError('unavailable')` (HTTP 503); a
 * failed later reload keeps serving the previous snapshot.
 */
export interface OfferIndex {
  /** Loads the first snapshot and starts listening and the periodic reload. Never rejects for a database that is down: it retries. */
  start(): Promise<void>;
  /** Reloads now (after an in-flight reload, if any); rejects when the load fails. */
  refresh(): Promise<void>;
  /** Stops the timers and the listener; waits for an in-flight reload. */
  close(): Promise<void>;
  /** The snapshot's version: 0 before the first load, then increasing with every reload. */
  readonly version: number;
  /** When the current snapshot was loaded; null before the first load. */
  readonly loadedAt: Date | null;
  /** One page of offers for a validated query (`parseCapacityQuery`); the default query without one. */
  listOffers(query?: CapacityQuery): OfferListPage;
  /** `listOffers` with the page serialized: what the route sends. */
  listOffersJson(query?: CapacityQuery): OfferListJsonPage;
  /** GPU supply per catalog class and the billing range, for pricing. */
  supply(): FleetSupply;
}

function describe(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  const message = err instanceof Error ? err.message : String(err);
  return (typeof code === 'string' ? `${code}: ` : '') + message.slice(0, 200);
}

/** Creates the offer index over `db`; call `start()` before serving. */
export function createOfferIndex(db: Database, options: OfferIndexOptions): OfferIndex {
  const now = options.now ?? (() => new Date());
  const debounceMs = options.debounceMs ?? 200;
  const warn = options.onWarning ?? ((message: string) => console.warn(`offer index: ${message}`));
  const noQueue: ReadonlyMap<string, number> = new Map();
  const queued = options.queuedByClass ?? (() => noQueue);

  let snapshot: Snapshot | null = null;
  let lastError: unknown = null;
  let failing = false;
  let closed = false;
  let loading: Promise<void> | null = null;
  let pending: Promise<void> | null = null;
  let tick: NodeJS.Timeout | null = null;
  let debounce: NodeJS.Timeout | null = null;
  let unlisten: (() => Promise<void>) | null = null;

  const load = async (): Promise<void> => {
    const at = now();
    try {
      const rows = await loadFleetRows(db, at);
      snapshot = buildSnapshot(rows, (snapshot?.version ?? 0) + 1, at);
      lastError = null;
      if (failing) warn(`reload succeeded again; ${snapshot.size} offered machine rows`);
      failing = false;
    } catch (err) {
      lastError = err;
      if (!failing) {
        warn(
          snapshot
            ? `reload failed (${describe(err)}); serving the snapshot of ${snapshot.loadedAt.toISOString()} until a reload succeeds`
            : `first load failed (${describe(err)}); capacity answers 503 until a load succeeds`,
        );
      }
      failing = true;
      throw err;
    }
  };

  /** Runs a load; a call during a load queues exactly one more, shared by every caller. */
  const reload = (): Promise<void> => {
    if (pending) return pending;
    if (loading) {
      pending = loading
        .catch(() => {})
        .then(() => {
          pending = null;
          return reload();
        });
      return pending;
    }
    loading = load().finally(() => {
      loading = null;
    });
    return loading;
  };

  const ensureListening = async (): Promise<void> => {
    if (unlisten || closed) return;
    try {
      unlisten = await db.listen(FLEET_CHANGED_CHANNEL, () => {
        if (debounce || closed) return;
        debounce = setTimeout(() => {
          debounce = null;
          if (!closed) reload().catch(() => {});
        }, debounceMs);
        debounce.unref();
      });
    } catch (err) {
      // The periodic reload keeps the snapshot fresh meanwhile; the next tick tries again.
      if (!failing) warn(`cannot listen for fleet changes (${describe(err)}); retrying`);
    }
  };

  const schedule = () => {
    if (closed) return;
    // Until the first load succeeds, retry sooner than the full period.
    const delay = snapshot ? options.refreshMs : Math.min(options.refreshMs, 2_000);
    tick = setTimeout(() => {
      tick = null;
      void ensureListening()
        .then(() => reload())
        .catch(() => {})
        .finally(schedule);
    }, delay);
    tick.unref();
  };

  const current = (): Snapshot => {
    if (snapshot) return snapshot;
    throw new ApiError('unavailable', 'Capacity data is unavailable: the database cannot be reached. Retry later.', { cause: lastError ?? undefined });
  };

  const page = (query: CapacityQuery) => {
    const s = current();
    const result = queryOffers(s, query);
    return { s, result, queue: queued() };
  };

  return {
    async start() {
      await ensureListening();
      await reload().catch(() => {});
      schedule();
    },
    refresh: reload,
    async close() {
      closed = true;
      if (tick) clearTimeout(tick);
      if (debounce) clearTimeout(debounce);
      tick = null;
      debounce = null;
      await Promise.allSettled([loading, pending]);
      if (unlisten) await unlisten().catch(() => {});
      unlisten = null;
    },
    get version() {
      return snapshot?.version ?? 0;
    },
    get loadedAt() {
      return snapshot?.loadedAt ?? null;
    },
    listOffers(query = DEFAULT_CAPACITY_QUERY) {
      const { result, queue } = page(query);
      return {
        data: result.offers.map((o) => toCapacityOffer(o, queue.get(o.group.gpuClass.classId) ?? 0)),
        nextCursor: result.nextCursor,
      };
    },
    listOffersJson(query = DEFAULT_CAPACITY_QUERY) {
      const { result, queue } = page(query);
      let dataJson = '[';
      for (let i = 0; i < result.offers.length; i++) {
        const o = result.offers[i]!;
        if (i > 0) dataJson += ',';
        dataJson += offerJson(o, queue.get(o.group.gpuClass.classId) ?? 0);
      }
      return { dataJson: `${dataJson}]`, nextCursor: result.nextCursor };
    },
    supply() {
      return current().supply;
    },
  };
}
