import { GPU_CLASSES, REGIONS, WORKLOAD_TYPES, type CapacityOffer, type WorkloadType } from '@gpufarm/shared';
import { encodeCapacityCursor, type CapacityQuery, type CapacitySort } from './query.js';
import { ALL_WORKLOADS, TIER_RANK, WORKLOAD_BIT, tierOf, type OfferGroup, type Snapshot } from './snapshot.js';

/**
 * Answers a capacity query from a snapshot: one scan over the machine rows that match the
 * filters, folding consecutive rows of the same (farm, class, region) into an offer, then a
 * sort and a keyset page. The unfiltered list of each sort is built once per snapshot. Pure.
 */

/** One offer under construction: the machines of a group that matched the query. */
export class OfferAggregate {
  count = 0;
  busy = 0;
  maxAvailablePerMachine = 0;
  maxPerMachine = 0;
  machines = 0;
  minPrice = Number.POSITIVE_INFINITY;
  maxPrice = 0;
  minBillingSeconds = 0;
  tierRank = 3;
  uptimeCentiPct = 10_000;
  cudaRank = Number.POSITIVE_INFINITY;
  cudaVersion: string | null = null;
  driverRank = Number.POSITIVE_INFINITY;
  driverVersion: string | null = null;
  workloads = 0;
  simulated = true;
  /** The offer's JSON around `queue`, built when first serialized. */
  jsonBeforeQueue: string | null = null;
  jsonAfterQueue: string | null = null;

  constructor(readonly group: OfferGroup) {}

  get available(): number {
    return this.count - this.busy;
  }
}

/** The value a sort orders by; all are non-negative integers. */
export function sortKey(offer: OfferAggregate, sort: CapacitySort): number {
  switch (sort) {
    case 'available':
      return offer.count - offer.busy;
    case 'price_asc':
    case 'price_desc':
      return offer.minPrice;
    case 'vram':
      return offer.group.gpuClass.vramBytes;
    case 'uptime':
      return offer.uptimeCentiPct;
    case 'count':
      return offer.count;
  }
}

const ASCENDING: ReadonlySet<CapacitySort> = new Set(['price_asc']);

function comparator(sort: CapacitySort): (a: OfferAggregate, b: OfferAggregate) => number {
  const sign = ASCENDING.has(sort) ? 1 : -1;
  return (a, b) => sign * (sortKey(a, sort) - sortKey(b, sort)) || a.group.idRank - b.group.idRank;
}

/** True when `offer` comes after the cursor position in the sort's order. */
function isAfter(offer: OfferAggregate, sort: CapacitySort, key: number, id: string): boolean {
  const k = sortKey(offer, sort);
  if (k === key) return offer.group.id > id;
  return ASCENDING.has(sort) ? k > key : k < key;
}

interface RowFilter {
  rowStart: number;
  rowEnd: number;
  classOk: Uint8Array | null;
  regionOk: Uint8Array | null;
  maxPrice: number;
  minUptime: number;
  workloadBit: number;
  minCudaRank: number;
  availableOnly: boolean;
  minTier: number;
}

function isUnfiltered(q: CapacityQuery): boolean {
  return (
    q.model === undefined &&
    q.minVramBytes === undefined &&
    q.maxPriceMicroUsd === undefined &&
    q.farm === undefined &&
    q.regionKeys === undefined &&
    q.minUptimeCentiPct === undefined &&
    q.workload === undefined &&
    q.minCudaRank === undefined &&
    q.availability === 'all' &&
    q.minTier === undefined
  );
}

/** The query's filters over the snapshot's rows; null when nothing can match. */
function rowFilter(s: Snapshot, q: CapacityQuery): RowFilter | null {
  let rowStart = 0;
  let rowEnd = s.size;
  if (q.farm !== undefined) {
    const farmIndex = s.farmBySlug.get(q.farm);
    if (farmIndex === undefined) return null;
    const farm = s.farms[farmIndex]!;
    rowStart = farm.rowStart;
    rowEnd = farm.rowEnd;
  }
  let classOk: Uint8Array | null = null;
  if (q.model !== undefined || q.minVramBytes !== undefined) {
    classOk = new Uint8Array(256);
    GPU_CLASSES.forEach((gpuClass, i) => {
      const modelOk = q.model === undefined || gpuClass.classId === q.model;
      const vramOk = q.minVramBytes === undefined || gpuClass.vramBytes >= q.minVramBytes;
      classOk![i] = modelOk && vramOk ? 1 : 0;
    });
  }
  let regionOk: Uint8Array | null = null;
  if (q.regionKeys !== undefined) {
    regionOk = new Uint8Array(256);
    const wanted = new Set(q.regionKeys);
    REGIONS.forEach((region, i) => {
      regionOk![i] = wanted.has(region.key) ? 1 : 0;
    });
  }
  return {
    rowStart,
    rowEnd,
    classOk,
    regionOk,
    maxPrice: q.maxPriceMicroUsd ?? Number.POSITIVE_INFINITY,
    minUptime: q.minUptimeCentiPct ?? 0,
    workloadBit: q.workload === undefined ? 0 : (WORKLOAD_BIT.get(q.workload) ?? 0) | ALL_WORKLOADS,
    minCudaRank: q.minCudaRank ?? 0,
    availableOnly: q.availability === 'available',
    minTier: q.minTier === undefined ? 0 : TIER_RANK[q.minTier],
  };
}

/** Folds the rows that pass `f` into offers, in snapshot (group) order. */
function aggregate(s: Snapshot, f: RowFilter | null): OfferAggregate[] {
  const out: OfferAggregate[] = [];
  if (f === null) return out;
  const { group, classIdx, regionIdx, price, gpus, busy, minBilling, tier, cudaRank, driverRank, workloads, simulated, uptime } = s;
  const { classOk, regionOk, maxPrice, minUptime, workloadBit, minCudaRank, availableOnly, minTier } = f;
  let current: OfferAggregate | undefined;
  let currentGroup = -1;
  for (let i = f.rowStart; i < f.rowEnd; i++) {
    if (classOk !== null && classOk[classIdx[i]!] === 0) continue;
    if (regionOk !== null && regionOk[regionIdx[i]!] === 0) continue;
    const rowPrice = price[i]!;
    if (rowPrice > maxPrice) continue;
    const rowUptime = uptime[i]!;
    if (rowUptime < minUptime) continue;
    const rowWorkloads = workloads[i]!;
    if (workloadBit !== 0 && (rowWorkloads & workloadBit) === 0) continue;
    const rowCuda = cudaRank[i]!;
    if (rowCuda < minCudaRank) continue;
    const rowGpus = gpus[i]!;
    const rowBusy = busy[i]!;
    if (availableOnly && rowBusy >= rowGpus) continue;
    const rowTier = tier[i]!;
    if (rowTier < minTier) continue;

    const g = group[i]!;
    if (g !== currentGroup) {
      current = new OfferAggregate(s.groups[g]!);
      currentGroup = g;
      out.push(current);
    }
    const o = current!;
    o.count += rowGpus;
    o.busy += rowBusy;
    o.machines += 1;
    if (rowGpus - rowBusy > o.maxAvailablePerMachine) o.maxAvailablePerMachine = rowGpus - rowBusy;
    if (rowGpus > o.maxPerMachine) o.maxPerMachine = rowGpus;
    if (rowPrice < o.minPrice) o.minPrice = rowPrice;
    if (rowPrice > o.maxPrice) o.maxPrice = rowPrice;
    if (minBilling[i]! > o.minBillingSeconds) o.minBillingSeconds = minBilling[i]!;
    if (rowTier < o.tierRank) o.tierRank = rowTier;
    if (rowUptime < o.uptimeCentiPct) o.uptimeCentiPct = rowUptime;
    if (rowCuda < o.cudaRank) {
      o.cudaRank = rowCuda;
      o.cudaVersion = s.cuda[i]!;
    }
    if (driverRank[i]! < o.driverRank) {
      o.driverRank = driverRank[i]!;
      o.driverVersion = s.driver[i]!;
    }
    o.workloads |= rowWorkloads;
    if (simulated[i] === 0) o.simulated = false;
  }
  return out;
}

/** The unfiltered offers in one sort's order, built once per snapshot. */
function unfilteredSorted(s: Snapshot, sort: CapacitySort): OfferAggregate[] {
  const cacheKey = `sorted:${sort}`;
  let list = s.cache.get(cacheKey) as OfferAggregate[] | undefined;
  if (list === undefined) {
    const all = (s.cache.get('all') as OfferAggregate[] | undefined) ?? aggregate(s, rowFilter(s, { availability: 'all', sort, limit: 1 }));
    s.cache.set('all', all);
    list = [...all].sort(comparator(sort));
    s.cache.set(cacheKey, list);
  }
  return list;
}

/** First index of a sorted list that comes after the cursor (binary search). */
function firstAfter(list: readonly OfferAggregate[], sort: CapacitySort, key: number, id: string): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (isAfter(list[mid]!, sort, key, id)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

export interface OfferPage {
  offers: OfferAggregate[];
  nextCursor: string | null;
}

/** One page of offers for a validated query. */
export function queryOffers(s: Snapshot, q: CapacityQuery): OfferPage {
  let page: OfferAggregate[];
  let more: boolean;
  if (isUnfiltered(q)) {
    const list = unfilteredSorted(s, q.sort);
    const start = q.after ? firstAfter(list, q.sort, q.after.key, q.after.id) : 0;
    page = list.slice(start, start + q.limit);
    more = start + q.limit < list.length;
  } else {
    let offers = aggregate(s, rowFilter(s, q));
    if (q.after) {
      const { key, id } = q.after;
      offers = offers.filter((o) => isAfter(o, q.sort, key, id));
    }
    offers.sort(comparator(q.sort));
    more = offers.length > q.limit;
    page = more ? offers.slice(0, q.limit) : offers;
  }
  const last = page[page.length - 1];
  return {
    offers: page,
    nextCursor: more && last ? encodeCapacityCursor({ sort: q.sort, key: sortKey(last, q.sort), id: last.group.id }) : null,
  };
}

const workloadLists: (WorkloadType[] | null)[] = [];
const workloadJson: string[] = [];
const sortedWorkloads = [...WORKLOAD_TYPES].sort();
function workloadsOf(mask: number): WorkloadType[] | null {
  if (mask & ALL_WORKLOADS) return null;
  let list = workloadLists[mask];
  if (list === undefined) {
    list = sortedWorkloads.filter((w) => (mask & WORKLOAD_BIT.get(w)!) !== 0);
    workloadLists[mask] = list;
  }
  return list;
}
function workloadsJsonOf(mask: number): string {
  return (workloadJson[mask] ??= JSON.stringify(workloadsOf(mask)));
}

/** The offer's JSON text; `queue` is filled in per request. */
export function offerJson(o: OfferAggregate, queue: number): string {
  if (o.jsonBeforeQueue === null || o.jsonAfterQueue === null) {
    const g = o.group;
    o.jsonBeforeQueue =
      `${g.headJson}${o.cudaVersion === null ? 'null' : JSON.stringify(o.cudaVersion)},"driverVersion":${o.driverVersion === null ? 'null' : JSON.stringify(o.driverVersion)}},` +
      `"count":${o.count},"available":${o.count - o.busy},"busy":${o.busy},"maxAvailablePerMachine":${o.maxAvailablePerMachine},` +
      `"maxPerMachine":${o.maxPerMachine},"machines":${o.machines},"combinedVramBytes":${o.count * g.gpuClass.vramBytes},` +
      `"benchmarkTier":"${tierOf(o.tierRank)}","uptimePct":${o.uptimeCentiPct / 100}${g.regionJson}${o.minPrice},` +
      `"maxPerGpuHourMicroUsd":${o.maxPrice},"minBillingSeconds":${o.minBillingSeconds}},"queue":`;
    o.jsonAfterQueue = `,"status":"${o.count > o.busy ? 'AVAILABLE' : 'BUSY'}","workloads":${workloadsJsonOf(o.workloads)},"simulated":${o.simulated}}`;
  }
  return o.jsonBeforeQueue + queue + o.jsonAfterQueue;
}

/** The offer as an object, field for field what `offerJson` writes. */
export function toCapacityOffer(o: OfferAggregate, queue: number): CapacityOffer {
  const g = o.group;
  const c = g.gpuClass;
  return {
    id: g.id,
    kind: 'farm',
    farm: { slug: g.farm.slug, name: g.farm.name },
    provider: g.farm.provider,
    gpu: {
      classId: c.classId,
      label: c.label,
      model: c.model,
      vendor: c.vendor,
      family: c.family,
      vramBytes: c.vramBytes,
      cudaVersion: o.cudaVersion,
      driverVersion: o.driverVersion,
    },
    count: o.count,
    available: o.count - o.busy,
    busy: o.busy,
    maxAvailablePerMachine: o.maxAvailablePerMachine,
    maxPerMachine: o.maxPerMachine,
    machines: o.machines,
    combinedVramBytes: o.count * c.vramBytes,
    benchmarkTier: tierOf(o.tierRank),
    uptimePct: o.uptimeCentiPct / 100,
    region: { key: g.region.key, label: g.region.label, group: g.region.group },
    price: { perGpuHourMicroUsd: o.minPrice, maxPerGpuHourMicroUsd: o.maxPrice, minBillingSeconds: o.minBillingSeconds },
    queue,
    status: o.count > o.busy ? 'AVAILABLE' : 'BUSY',
    workloads: workloadsOf(o.workloads),
    simulated: o.simulated,
  };
}
