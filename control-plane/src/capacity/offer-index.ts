import type { CapacityOffer } from '@gpufarm/shared';
import { CapacityUnavailable } from './capacity-unavailable.js';
import { createNotifiedLoop } from '../background/notified-loop.js';
import type { Database } from '../db/database.js';
import { silentLogger, type Logger } from '../logger.js';
import { summarizeFit, type FitSummary, type JobRequirements } from './fit.js';
import { isUnfiltered, offerJson, queryOffers, toCapacityOffer } from './offers.js';
import { DEFAULT_CAPACITY_QUERY, type CapacityQuery } from './query.js';
import { buildSnapshot, withUptime, type FleetSupply, type Snapshot } from './snapshot.js';
import { loadFleetRows, loadGpuClasses, loadUptimeSeconds, uptimeWindowFirstDay, type ListedGpuClass } from './store.js';

/** The channel the fleet tables' triggers notify (migration 001). */
export const FLEET_CHANGED_CHANNEL = 'fleet_changed';
/** Every this many periodic reloads, one reads the whole fleet even without a notification. */
const FULL_RELOAD_EVERY = 10;

export interface OfferIndexOptions {
  /**
   * Reload period: refreshes the 30-day uptimes, and the whole fleet every 10th time or while
   * change notifications cannot be received.
   */
  refreshMs: number;
  /** The clock; uptimes are computed as of `now()`. */
  now?: () => Date;
  /** Jobs waiting per GPU class id, shown as each offer's `queue`; none by default. */
  queuedByClass?: () => ReadonlyMap<string, number>;
  /** Delay between a `fleet_changed` notification and the reload it triggers; 200 ms by default. */
  debounceMs?: number;
  /**
   * Where a failed reload, the recovery after it and a listener that cannot listen are logged
   * (with `loop: 'offer index'` and the error as `err`). Default: nowhere.
   */
  log?: Logger;
  /**
   * List machines whose agent runs in simulated mode (`ExecutionConfig.allowSimulatedMachines`).
   * Off by default: a deployment with live keys never offers them.
   */
  allowSimulated?: boolean;
}

/** A page of `GET /v1/capacity`. */
export interface OfferListPage {
  data: CapacityOffer[];
  nextCursor: string | null;
}

/** The same page with `data` serialized: a JSON array in UTF-8. */
export interface OfferListJsonPage {
  dataJson: Buffer;
  nextCursor: string | null;
}

/**
 * The in-process offer index: an in-memory snapshot of every offered machine, reloaded after
 * the fleet tables change (LISTEN `fleet_changed`, debounced), with its uptimes refreshed
 * every `refreshMs`, and queried synchronously by the capacity and pricing routes. Each
 * replica keeps its own.
 *
 * Queries before the first successful load throw `CapacityUnavailable` (HTTP 503); a
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
  /**
   * `listOffers` with the page serialized: what the route sends. Unfiltered pages are
   * serialized once per snapshot and set of queue figures, and the same bytes served until
   * either changes.
   */
  listOffersJson(query?: CapacityQuery): OfferListJsonPage;
  /** GPU supply per class (curated, and derived with GPUs online) and the billing range, for pricing. */
  supply(): FleetSupply;
  /** A class `gpu_classes` lists (curated or derived) by id, as of the current snapshot; undefined when none. */
  gpuClass(classId: string): ListedGpuClass | undefined;
  /** The offered machines that could run a job with these requirements, summarized. */
  summarizeFit(requirements: JobRequirements): FitSummary;
}

/** Creates the offer index over `db`; call `start()` before serving. */
export function createOfferIndex(db: Database, options: OfferIndexOptions): OfferIndex {
  const now = options.now ?? (() => new Date());
  const debounceMs = options.debounceMs ?? 200;
  const noQueue: ReadonlyMap<string, number> = new Map();
  const queued = options.queuedByClass ?? (() => noQueue);
  const fleet = { allowSimulated: options.allowSimulated ?? false };

  let snapshot: Snapshot | null = null;
  let lastError: unknown = null;

  /** Seconds up per machine, from the last full load (plus machines that appeared since). */
  let uptime: { firstDay: string; seconds: Map<string, number> } | null = null;

  /**
   * What a load reads: `full` the fleet and every machine's uptime days; `fleet` (after a
   * change notification) the fleet and the uptime of machines not seen before; `uptime` (the
   * periodic reload while no change was notified) only the uptime days, keeping the fleet.
   */
  type LoadMode = 'uptime' | 'fleet' | 'full';

  const load = async (requested: LoadMode): Promise<void> => {
    const at = now();
    const firstDay = uptimeWindowFirstDay(at);
    // A new UTC day moves the uptime window; the first load has nothing to keep.
    const mode: LoadMode = snapshot === null || uptime === null || uptime.firstDay !== firstDay ? 'full' : requested;
    const version = (snapshot?.version ?? 0) + 1;
    try {
      if (mode === 'uptime') {
        const seconds = await loadUptimeSeconds(db, firstDay);
        uptime = { firstDay, seconds };
        snapshot = withUptime(snapshot!, seconds, version, at);
      } else if (mode === 'full') {
        const [rows, classes, seconds] = await Promise.all([loadFleetRows(db, fleet), loadGpuClasses(db), loadUptimeSeconds(db, firstDay)]);
        uptime = { firstDay, seconds };
        snapshot = buildSnapshot(rows, classes, seconds, version, at);
      } else {
        const [rows, classes] = await Promise.all([loadFleetRows(db, fleet), loadGpuClasses(db)]);
        const known = uptime!.seconds;
        const unseen = [...new Set(rows.filter((r) => !known.has(r.machineId)).map((r) => r.machineId))];
        if (unseen.length > 0) {
          const found = await loadUptimeSeconds(db, firstDay, unseen);
          for (const id of unseen) known.set(id, found.get(id) ?? 0);
        }
        snapshot = buildSnapshot(rows, classes, known, version, at);
      }
      lastError = null;
    } catch (err) {
      lastError = err;
      throw err;
    }
  };

  /**
   * The reloads: on `refresh()` and at start the whole fleet; after a `fleet_changed`
   * notification (debounced) the fleet; on the periodic tick only the uptimes while the
   * listener is up (a full rebuild stalls requests for tens of ms at 10,000 machines), and
   * everything every `FULL_RELOAD_EVERY`th tick, in case a notification was lost with a dropped
   * connection, or on every tick while notifications cannot be received. Until the first load
   * succeeds, the timer tries again sooner than the full period (2 s).
   */
  const loop = createNotifiedLoop({
    name: 'offer index',
    log: options.log ?? silentLogger,
    intervalMs: options.refreshMs,
    firstIntervalMs: 2_000,
    db,
    channels: { [FLEET_CHANGED_CHANNEL]: { debounceMs } },
    run: (cause) => {
      const mode: LoadMode =
        cause.asked || (cause.timer && (!cause.listening || cause.ticks % FULL_RELOAD_EVERY === 0)) ? 'full' : cause.notified.size > 0 ? 'fleet' : 'uptime';
      return load(mode);
    },
    // Says what the customers see meanwhile; the error itself is the line's `err`.
    failureMessage: () =>
      snapshot
        ? `offer index reload failed; serving the snapshot of ${snapshot.loadedAt.toISOString()} until a reload succeeds`
        : 'offer index first load failed; capacity answers 503 until a load succeeds',
  });

  const current = (): Snapshot => {
    if (snapshot) return snapshot;
    throw new CapacityUnavailable(lastError ?? undefined);
  };

  /**
   * Serialized unfiltered pages of one snapshot version and one set of queue figures: every
   * client asking for the default listing gets the same bytes until either changes.
   */
  let pageCache: { version: number; queue: string; pages: Map<string, OfferListJsonPage> } = { version: 0, queue: '', pages: new Map() };
  const PAGE_CACHE_LIMIT = 256;
  /**
   * The queue figures as text, recomputed only for a new map: the figures are recounted every
   * matcher tick into a new map, mostly with the same counts, which must not drop the pages.
   */
  let queueSeen: ReadonlyMap<string, number> | null = null;
  let queueText = '';
  const queueKey = (queue: ReadonlyMap<string, number>): string => {
    if (queue !== queueSeen) {
      queueSeen = queue;
      queueText = JSON.stringify([...queue].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)));
    }
    return queueText;
  };
  let fitCache: { version: number; answers: Map<string, FitSummary> } = { version: 0, answers: new Map() };
  const FIT_CACHE_LIMIT = 4096;

  return {
    start: () => loop.start(),
    refresh: () => loop.runNow(),
    close: () => loop.close(),
    get version() {
      return snapshot?.version ?? 0;
    },
    get loadedAt() {
      return snapshot?.loadedAt ?? null;
    },
    listOffers(query = DEFAULT_CAPACITY_QUERY) {
      const result = queryOffers(current(), query);
      const queue = queued();
      return {
        data: result.offers.map((o) => toCapacityOffer(o, queue.get(o.group.gpuClass.classId) ?? 0)),
        nextCursor: result.nextCursor,
      };
    },
    listOffersJson(query = DEFAULT_CAPACITY_QUERY) {
      const s = current();
      const queue = queued();
      const cacheKey = isUnfiltered(query) ? `${query.sort}|${query.limit}|${query.after?.key}|${query.after?.id}` : null;
      if (cacheKey !== null) {
        const queueNow = queueKey(queue);
        if (pageCache.version !== s.version || pageCache.queue !== queueNow) pageCache = { version: s.version, queue: queueNow, pages: new Map() };
        const cached = pageCache.pages.get(cacheKey);
        if (cached) return cached;
      }
      const result = queryOffers(s, query);
      let text = '[';
      for (let i = 0; i < result.offers.length; i++) {
        const o = result.offers[i]!;
        if (i > 0) text += ',';
        text += offerJson(o, queue.get(o.group.gpuClass.classId) ?? 0);
      }
      // One UTF-8 encoding here; a string body would be measured and encoded again per send.
      const built = { dataJson: Buffer.from(`${text}]`), nextCursor: result.nextCursor };
      if (cacheKey !== null && pageCache.pages.size < PAGE_CACHE_LIMIT) pageCache.pages.set(cacheKey, built);
      return built;
    },
    supply() {
      return current().supply;
    },
    gpuClass(classId) {
      const s = current();
      const i = s.classIndex.get(classId);
      return i === undefined ? undefined : s.classes[i];
    },
    summarizeFit(requirements) {
      // Jobs of the same shape price against the same snapshot: remember each answer until the next load.
      const s = current();
      if (fitCache.version !== s.version) fitCache = { version: s.version, answers: new Map() };
      const key = `${requirements.gpuCount}|${requirements.minVramBytes}|${requirements.classIds?.join(',') ?? '*'}|${requirements.workloadType}|${requirements.capMicroUsd}|${requirements.provenOnly}`;
      let answer = fitCache.answers.get(key);
      if (!answer) {
        answer = summarizeFit(s, requirements);
        if (fitCache.answers.size >= FIT_CACHE_LIMIT) fitCache.answers.clear();
        fitCache.answers.set(key, answer);
      }
      return { ...answer, matchedClasses: [...answer.matchedClasses] };
    },
  };
}
