import { createHash } from 'node:crypto';
import { BENCHMARK_TIERS, GPU_CLASSES, REGIONS, WORKLOAD_TYPES, type BenchmarkTier, type Region } from '@gpufarm/shared';
import { uptimeCentiPct, type FleetRow, type ListedGpuClass } from './store.js';
import { versionRank } from './versions.js';

/**
 * An immutable, compact picture of the offered fleet, rebuilt on every load. Machine rows
 * live in parallel typed arrays sorted by offer (farm, class, region), so a query is one scan
 * that folds consecutive matching rows into offers. Everything constant per offer (ids,
 * farm, class and region JSON) is prepared here once. Pure: no I/O.
 */

/** Benchmark tiers as ranks: S 3, A 2, B 1, C 0. A machine without a tier counts as C. */
export const TIER_RANK: Readonly<Record<BenchmarkTier, number>> = { S: 3, A: 2, B: 1, C: 0 };
export const TIER_BY_RANK: readonly BenchmarkTier[] = ['C', 'B', 'A', 'S'];

/** Bit per workload type (the catalog order); `ALL_WORKLOADS` marks a machine that takes any. */
export const WORKLOAD_BIT: ReadonlyMap<string, number> = new Map(WORKLOAD_TYPES.map((w, i) => [w, 1 << i]));
export const ALL_WORKLOADS = 1 << WORKLOAD_TYPES.length;

/** `Snapshot.provenAt` of a machine that has not proven its GPUs: below every real time, so an offer's minimum says whether all are proven. */
export const NOT_PROVEN = -1;

/** A (farm, GPU class, region) triple: one offer when any of its machines matches a query. */
export interface OfferGroup {
  /** `off_` + 16 hex digits of sha256(farmId/classId/regionKey): stable across loads, opaque. */
  id: string;
  /** Position of `id` among all group ids, for cheap tie-breaks. */
  idRank: number;
  farm: FarmInfo;
  gpuClass: ListedGpuClass;
  region: Region;
  /** Indices into `Snapshot.farms`, `Snapshot.classes` and `REGIONS`. */
  farmIndex: number;
  classIndex: number;
  regionIndex: number;
  /** The offer's JSON from `{"id":` through `"cudaVersion":`. */
  headJson: string;
  /** `,"region":{…},"price":{"perGpuHourMicroUsd":` — see `offers.ts`. */
  regionJson: string;
}

export interface FarmInfo {
  id: string;
  slug: string;
  name: string;
  provider: string;
  /** Rows of this farm: `[rowStart, rowEnd)`. */
  rowStart: number;
  rowEnd: number;
}

/** Supply per GPU class, for `GET /v1/pricing`. Prices are per machine row, sorted ascending. */
export interface ClassSupply {
  gpuClass: ListedGpuClass;
  /** GPUs on online machines of active farms, priced or not. */
  gpusOnline: number;
  gpusBusy: number;
  /** Idle GPUs on priced machines: what can be rented now. */
  gpusAvailable: number;
  gpusPriced: number;
  /** Price per GPU-hour of each priced machine row, ascending, with its GPU count alongside. */
  prices: Float64Array;
  priceGpus: Int32Array;
}

export interface FleetSupply {
  /**
   * One entry per curated class, in catalog order, then one per derived class with GPUs online,
   * by id: a derived class nobody brings any more is not listed.
   */
  classes: ClassSupply[];
  /** Over offered (priced) machines; null when none is offered. */
  minBillingSeconds: { min: number; max: number } | null;
}

export interface Snapshot {
  /** Increases with every successful load. */
  version: number;
  loadedAt: Date;
  /** Offered machine rows. */
  size: number;
  group: Int32Array;
  farm: Int32Array;
  classIdx: Uint16Array;
  regionIdx: Uint8Array;
  price: Float64Array;
  gpus: Int32Array;
  busy: Int32Array;
  minBilling: Int32Array;
  tier: Uint8Array;
  cudaRank: Float64Array;
  cuda: (string | null)[];
  driverRank: Float64Array;
  driver: (string | null)[];
  workloads: Uint16Array;
  simulated: Uint8Array;
  /** Per row: the machine's last passed GPU challenge on real GPUs, epoch ms; `NOT_PROVEN` when none (always for a simulated machine). */
  provenAt: Float64Array;
  uptime: Int32Array;
  /** Per row: the machine and its creation time, to recompute uptimes (`withUptime`). */
  machineId: string[];
  createdAtMs: Float64Array;
  groups: OfferGroup[];
  farms: FarmInfo[];
  farmBySlug: Map<string, number>;
  /** Every class `gpu_classes` lists: the curated ones in catalog order, then the derived ones by id. */
  classes: ListedGpuClass[];
  classIndex: ReadonlyMap<string, number>;
  /** Row indices: every row (0…size-1), per class and per catalog region, ascending. */
  allRows: Int32Array;
  classRows: Int32Array[];
  regionRows: Int32Array[];
  supply: FleetSupply;
  /** Per-sort caches of the unfiltered list, filled by `offers.ts` on first use. */
  cache: Map<string, unknown>;
}

/** Rows per snapshot are below this (2^21); see the sort in `buildSnapshot`. */
const ROW_SPAN = 2 ** 21;

const catalogOrder = new Map(GPU_CLASSES.map((c, i) => [c.classId, i]));
const regionIndex = new Map(REGIONS.map((r, i) => [r.key, i]));

const offerIds = new Map<string, string>();
/** The offer id of a (farm, class, region) triple; memoised, as it never changes. */
export function offerIdFor(farmId: string, classId: string, regionKey: string): string {
  const key = `${farmId}/${classId}/${regionKey}`;
  let id = offerIds.get(key);
  if (id === undefined) {
    id = `off_${createHash('sha256').update(key).digest('hex').slice(0, 16)}`;
    if (offerIds.size > 200_000) offerIds.clear();
    offerIds.set(key, id);
  }
  return id;
}

const json = JSON.stringify;

function workloadMask(workloads: readonly string[] | null): number {
  if (workloads === null) return ALL_WORKLOADS;
  let mask = 0;
  // Values outside the catalog cannot be asked for; they are left out of the offer.
  for (const w of workloads) mask |= WORKLOAD_BIT.get(w) ?? 0;
  return mask;
}

function safePrice(value: unknown): number | null {
  if (value === null || value === undefined) return null;
  const n = Number(value);
  return Number.isSafeInteger(n) && n > 0 ? n : null;
}

/** The classes in the snapshot's order: curated ones as the catalog lists them, then derived ones by id. */
function orderClasses(listed: readonly ListedGpuClass[]): ListedGpuClass[] {
  const rank = (c: ListedGpuClass) => catalogOrder.get(c.classId) ?? GPU_CLASSES.length;
  return [...listed].sort((a, b) => rank(a) - rank(b) || (a.classId < b.classId ? -1 : a.classId > b.classId ? 1 : 0));
}

/**
 * Builds a snapshot from the loaded rows, the classes `gpu_classes` lists and each machine's
 * seconds up in the uptime window, as of `loadedAt`. Rows of classes or regions that are not
 * listed are left out.
 */
export function buildSnapshot(rows: readonly FleetRow[], listedClasses: readonly ListedGpuClass[], uptimeSeconds: ReadonlyMap<string, number>, version: number, loadedAt: Date): Snapshot {
  if (rows.length >= ROW_SPAN) throw new RangeError(`the offer index holds at most ${ROW_SPAN - 1} machine rows`);
  const classes = orderClasses(listedClasses);
  const classIndex = new Map(classes.map((c, i) => [c.classId, i]));
  if (classes.length >= 65_536) throw new RangeError('the offer index holds at most 65535 GPU classes');
  const supplyAcc = classes.map(() => ({ online: 0, busy: 0, available: 0, priced: 0, prices: [] as Array<[number, number]> }));
  let minBillingMin = Infinity;
  let minBillingMax = -Infinity;

  // Offered rows as indices into `rows`, then ordered by offer (farm, class, region) with a
  // numeric key: string comparisons in the sort cost more than the rest of the build.
  const offeredRows: number[] = [];
  const offeredClass: number[] = [];
  const offeredRegion: number[] = [];
  const offeredPrice: number[] = [];
  const farmIds: string[] = [];
  const farmSeen = new Set<string>();
  rows.forEach((row, r) => {
    const cls = classIndex.get(row.classId);
    const region = regionIndex.get(row.regionKey);
    if (cls === undefined || region === undefined) return;
    const acc = supplyAcc[cls]!;
    acc.online += row.gpus;
    acc.busy += row.busy;
    const price = safePrice(row.pricePerGpuHourMicroUsd);
    if (price === null) return;
    acc.available += row.gpus - row.busy;
    acc.priced += row.gpus;
    acc.prices.push([price, row.gpus]);
    if (row.minBillingSeconds < minBillingMin) minBillingMin = row.minBillingSeconds;
    if (row.minBillingSeconds > minBillingMax) minBillingMax = row.minBillingSeconds;
    offeredRows.push(r);
    offeredClass.push(cls);
    offeredRegion.push(region);
    offeredPrice.push(price);
    if (!farmSeen.has(row.farmId)) {
      farmSeen.add(row.farmId);
      farmIds.push(row.farmId);
    }
  });
  farmIds.sort();
  const farmOrdinal = new Map(farmIds.map((id, i) => [id, i]));
  const offerKey = new Float64Array(offeredRows.length);
  // Key (farm, class, region in mixed radix) and position in one number, exact below 2^53 (keys
  // below 2^32, 2^21 rows), so a native numeric sort orders the rows.
  const regionRadix = REGIONS.length;
  const classRadix = Math.max(1, classes.length);
  if (Math.max(1, farmIds.length) * classRadix * regionRadix >= 2 ** 32) throw new RangeError('the offer index holds fewer farms × GPU classes × regions than 2^32');
  const order = new Float64Array(offeredRows.length);
  for (let k = 0; k < offeredRows.length; k++) {
    offerKey[k] = (farmOrdinal.get(rows[offeredRows[k]!]!.farmId)! * classRadix + offeredClass[k]!) * regionRadix + offeredRegion[k]!;
    order[k] = offerKey[k]! * ROW_SPAN + k;
  }
  order.sort();

  const size = order.length;
  const snapshot: Snapshot = {
    version,
    loadedAt,
    size,
    group: new Int32Array(size),
    farm: new Int32Array(size),
    classIdx: new Uint16Array(size),
    regionIdx: new Uint8Array(size),
    price: new Float64Array(size),
    gpus: new Int32Array(size),
    busy: new Int32Array(size),
    minBilling: new Int32Array(size),
    tier: new Uint8Array(size),
    cudaRank: new Float64Array(size),
    cuda: new Array<string | null>(size),
    driverRank: new Float64Array(size),
    driver: new Array<string | null>(size),
    workloads: new Uint16Array(size),
    simulated: new Uint8Array(size),
    provenAt: new Float64Array(size),
    uptime: new Int32Array(size),
    machineId: new Array<string>(size),
    createdAtMs: new Float64Array(size),
    groups: [],
    farms: [],
    farmBySlug: new Map(),
    classes,
    classIndex,
    allRows: Int32Array.from({ length: size }, (_, i) => i),
    classRows: [],
    regionRows: [],
    supply: {
      classes: classes.flatMap((gpuClass, i) => {
        const acc = supplyAcc[i]!;
        if (gpuClass.origin === 'derived' && acc.online === 0) return [];
        acc.prices.sort((a, b) => a[0] - b[0]);
        return {
          gpuClass,
          gpusOnline: acc.online,
          gpusBusy: acc.busy,
          gpusAvailable: acc.available,
          gpusPriced: acc.priced,
          prices: Float64Array.from(acc.prices, (p) => p[0]),
          priceGpus: Int32Array.from(acc.prices, (p) => p[1]),
        };
      }),
      minBillingSeconds: size > 0 ? { min: minBillingMin, max: minBillingMax } : null,
    },
    cache: new Map(),
  };

  let farm: FarmInfo | undefined;
  let groupKey = -1;
  for (let i = 0; i < size; i++) {
    const k = order[i]! % ROW_SPAN;
    const row = rows[offeredRows[k]!]!;
    const cls = offeredClass[k]!;
    const region = offeredRegion[k]!;
    if (farm?.id !== row.farmId) {
      if (farm) farm.rowEnd = i;
      farm = { id: row.farmId, slug: row.farmSlug, name: row.farmName, provider: row.provider, rowStart: i, rowEnd: size };
      snapshot.farmBySlug.set(farm.slug, snapshot.farms.length);
      snapshot.farms.push(farm);
    }
    if (offerKey[k] !== groupKey) {
      groupKey = offerKey[k]!;
      snapshot.groups.push(makeGroup(farm, snapshot.farms.length - 1, classes, cls, region));
    }
    snapshot.group[i] = snapshot.groups.length - 1;
    snapshot.farm[i] = snapshot.farms.length - 1;
    snapshot.classIdx[i] = cls;
    snapshot.regionIdx[i] = region;
    snapshot.price[i] = offeredPrice[k]!;
    snapshot.gpus[i] = row.gpus;
    snapshot.busy[i] = row.busy;
    snapshot.minBilling[i] = row.minBillingSeconds;
    snapshot.tier[i] = TIER_RANK[row.benchmarkTier as BenchmarkTier] ?? 0;
    snapshot.cuda[i] = row.cudaVersion;
    snapshot.cudaRank[i] = versionRank(row.cudaVersion);
    snapshot.driver[i] = row.driverVersion;
    snapshot.driverRank[i] = versionRank(row.driverVersion);
    snapshot.workloads[i] = workloadMask(row.workloads);
    snapshot.simulated[i] = row.simulated ? 1 : 0;
    // A simulated machine proves no class, whatever its row says.
    snapshot.provenAt[i] = row.simulated || row.provenAtMs === null ? NOT_PROVEN : row.provenAtMs;
    snapshot.uptime[i] = uptimeCentiPct(uptimeSeconds.get(row.machineId) ?? 0, row.createdAtMs, loadedAt);
    snapshot.machineId[i] = row.machineId;
    snapshot.createdAtMs[i] = row.createdAtMs;
  }

  snapshot.classRows = rowsBy(snapshot.classIdx, classes.length);
  snapshot.regionRows = rowsBy(snapshot.regionIdx, REGIONS.length);

  const byId = snapshot.groups.map((g, i) => [g.id, i] as const).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  byId.forEach(([, groupIndex], rank) => {
    snapshot.groups[groupIndex]!.idRank = rank;
  });
  return snapshot;
}

/**
 * The same fleet with fresh uptimes as of `loadedAt`: everything else is shared with `s`
 * (read-only), the per-query caches start empty. A few milliseconds instead of a full build.
 */
export function withUptime(s: Snapshot, uptimeSeconds: ReadonlyMap<string, number>, version: number, loadedAt: Date): Snapshot {
  const uptime = new Int32Array(s.size);
  for (let i = 0; i < s.size; i++) uptime[i] = uptimeCentiPct(uptimeSeconds.get(s.machineId[i]!) ?? 0, s.createdAtMs[i]!, loadedAt);
  return { ...s, version, loadedAt, uptime, cache: new Map() };
}

/** For each value 0..n-1, the ascending indices where `values` holds it. */
function rowsBy(values: Uint8Array | Uint16Array, n: number): Int32Array[] {
  const counts = new Int32Array(n);
  for (const v of values) counts[v]! += 1;
  const lists = Array.from(counts, (c) => new Int32Array(c));
  const filled = new Int32Array(n);
  values.forEach((v, i) => {
    lists[v]![filled[v]!++] = i;
  });
  return lists;
}

function makeGroup(farm: FarmInfo, farmIndex: number, classes: readonly ListedGpuClass[], classIndex: number, regionIndex: number): OfferGroup {
  const gpuClass = classes[classIndex]!;
  const region = REGIONS[regionIndex]!;
  const id = offerIdFor(farm.id, gpuClass.classId, region.key);
  return {
    id,
    idRank: 0,
    farm,
    gpuClass,
    region,
    farmIndex,
    classIndex,
    regionIndex,
    headJson:
      `{"id":${json(id)},"kind":"farm","farm":{"slug":${json(farm.slug)},"name":${json(farm.name)}},"provider":${json(farm.provider)},` +
      `"gpu":{"classId":${json(gpuClass.classId)},"label":${json(gpuClass.label)},"model":${json(gpuClass.model)},"vendor":${json(gpuClass.vendor)},` +
      `"family":${json(gpuClass.family)},"vramBytes":${gpuClass.vramBytes},"cudaVersion":`,
    regionJson: `,"region":{"key":${json(region.key)},"label":${json(region.label)},"group":${json(region.group)}},"price":{"perGpuHourMicroUsd":`,
  };
}

/** The tier letter of a rank. */
export function tierOf(rank: number): BenchmarkTier {
  return TIER_BY_RANK[rank] ?? BENCHMARK_TIERS[BENCHMARK_TIERS.length - 1]!;
}
