import { REGIONS, WORKLOAD_TYPES, type CapacityOffer, type CapacityProof, type WorkloadType } from '@gpufarm/shared';
import { encodeCapacityCursor, type CapacityQuery, type CapacitySort } from './query.js';
import { ALL_WORKLOADS, NOT_PROVEN, TIER_RANK, WORKLOAD_BIT, tierOf, type OfferGroup, type Snapshot } from './snapshot.js';

/**
 * Answers a capacity query from a snapshot, then sorts and cuts a keyset page. Three paths:
 * - no filter: the offers sorted once per snapshot and sort, a binary search for the cursor;
 * - filters on whole offers only (model, minVram, region, farm): the unfiltered offers of the
 *   matching farm, classes or regions are picked, with no row scan;
 * - filters on machines (maxPrice, minUptime, workload, cuda, availability, tier, proven): one scan
 *   over the candidate machine rows folds the matching ones into fresh offers.
 * Pure: no I/O.
 */

/** One offer: what the machines of a group that matched the query add up to. */
export class OfferAggregate {
  readonly group: OfferGroup;
  count: number;
  busy: number;
  maxAvailablePerMachine: number;
  maxPerMachine: number;
  machines: number;
  minPrice: number;
  maxPrice: number;
  minBillingSeconds: number;
  tierRank: number;
  uptimeCentiPct: number;
  cudaRank: number;
  cudaVersion: string | null;
  driverRank: number;
  driverVersion: string | null;
  workloads: number;
  simulated: boolean;
  /** The oldest `provenAt` of its machines, epoch ms; `NOT_PROVEN` (negative) when one of them is not proven. */
  provenAtMs: number;
  /** The offer's JSON around `queue`, built when first serialized. */
  jsonBeforeQueue: string | null;
  jsonAfterQueue: string | null;

  constructor(group: OfferGroup) {
    // Assigned here rather than as class fields: plain stores keep one stable object shape.
    this.group = group;
    this.count = 0;
    this.busy = 0;
    this.maxAvailablePerMachine = 0;
    this.maxPerMachine = 0;
    this.machines = 0;
    this.minPrice = Number.MAX_SAFE_INTEGER;
    this.maxPrice = 0;
    this.minBillingSeconds = 0;
    this.tierRank = 3;
    this.uptimeCentiPct = 10_000;
    this.cudaRank = Number.MAX_SAFE_INTEGER;
    this.cudaVersion = null;
    this.driverRank = Number.MAX_SAFE_INTEGER;
    this.driverVersion = null;
    this.workloads = 0;
    this.simulated = true;
    this.provenAtMs = NOT_PROVEN;
    this.jsonBeforeQueue = null;
    this.jsonAfterQueue = null;
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
  /** The rows of the farm asked for (all rows without `farm`): `[rowStart, rowEnd)`. */
  rowStart: number;
  rowEnd: number;
  /** The rows to look at: lists of row indices, each ascending, all within the range. */
  rowLists: Int32Array[];
  classOk: Uint8Array | null;
  regionOk: Uint8Array | null;
  maxPrice: number;
  minUptime: number;
  workloadBit: number;
  minCudaRank: number;
  availableOnly: boolean;
  minTier: number;
  /** Only machines that proved their GPUs. */
  provenOnly: boolean;
}

/** True when the query has no filter: its pages come from per-snapshot sorted lists. */
export function isUnfiltered(q: CapacityQuery): boolean {
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
    q.minTier === undefined &&
    q.provenOnly !== true
  );
}

const totalLength = (lists: readonly Int32Array[]) => lists.reduce((n, l) => n + l.length, 0);

/**
 * True when every filter of the query holds for whole offers (model, minVram, region, farm):
 * the offers are then the unfiltered ones, picked, with no row scan.
 */
function isGroupLevel(q: CapacityQuery): boolean {
  return (
    q.maxPriceMicroUsd === undefined &&
    q.minUptimeCentiPct === undefined &&
    q.workload === undefined &&
    q.minCudaRank === undefined &&
    q.availability === 'all' &&
    q.minTier === undefined &&
    q.provenOnly !== true
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
  // Scan the smallest set of rows that holds every match: the farm's rows, the rows of the
  // classes asked for, or the rows of the regions asked for.
  let rowLists = [s.allRows.subarray(rowStart, rowEnd)];
  let scanned = rowEnd - rowStart;
  let classOk: Uint8Array | null = null;
  if (q.model !== undefined || q.minVramBytes !== undefined) {
    classOk = new Uint8Array(s.classes.length);
    const lists: Int32Array[] = [];
    s.classes.forEach((gpuClass, i) => {
      const modelOk = q.model === undefined || gpuClass.classId === q.model;
      const vramOk = q.minVramBytes === undefined || gpuClass.vramBytes >= q.minVramBytes;
      classOk![i] = modelOk && vramOk ? 1 : 0;
      if (classOk![i]) lists.push(s.classRows[i]!);
    });
    if (q.farm === undefined && totalLength(lists) < scanned) {
      rowLists = lists;
      scanned = totalLength(lists);
    }
  }
  let regionOk: Uint8Array | null = null;
  if (q.regionKeys !== undefined) {
    regionOk = new Uint8Array(256);
    const lists: Int32Array[] = [];
    REGIONS.forEach((region, i) => {
      regionOk![i] = q.regionKeys!.includes(region.key) ? 1 : 0;
      if (regionOk![i]) lists.push(s.regionRows[i]!);
    });
    if (q.farm === undefined && totalLength(lists) < scanned) rowLists = lists;
  }
  return {
    rowStart,
    rowEnd,
    rowLists,
    classOk,
    regionOk,
    maxPrice: q.maxPriceMicroUsd ?? Number.POSITIVE_INFINITY,
    minUptime: q.minUptimeCentiPct ?? 0,
    workloadBit: q.workload === undefined ? 0 : (WORKLOAD_BIT.get(q.workload) ?? 0) | ALL_WORKLOADS,
    minCudaRank: q.minCudaRank ?? 0,
    availableOnly: q.availability === 'available',
    minTier: q.minTier === undefined ? 0 : TIER_RANK[q.minTier],
    provenOnly: q.provenOnly === true,
  };
}

/**
 * Per-group accumulators, reused by every query on a snapshot (queries run synchronously, one
 * at a time): typed arrays indexed by group, cheaper to update per row than object fields.
 */
interface Accumulators {
  epoch: number;
  mark: Int32Array;
  count: Int32Array;
  busy: Int32Array;
  machines: Int32Array;
  maxAvailable: Int32Array;
  maxPer: Int32Array;
  minBilling: Int32Array;
  tier: Int32Array;
  uptime: Int32Array;
  workloads: Int32Array;
  notSimulated: Int32Array;
  cudaRow: Int32Array;
  driverRow: Int32Array;
  minPrice: Float64Array;
  maxPrice: Float64Array;
  cudaRank: Float64Array;
  driverRank: Float64Array;
  provenAt: Float64Array;
}

function accumulators(s: Snapshot): Accumulators {
  let acc = s.cache.get('accumulators') as Accumulators | undefined;
  if (acc === undefined) {
    const n = s.groups.length;
    const ints = () => new Int32Array(n);
    const doubles = () => new Float64Array(n);
    acc = {
      epoch: 0,
      mark: ints(),
      count: ints(),
      busy: ints(),
      machines: ints(),
      maxAvailable: ints(),
      maxPer: ints(),
      minBilling: ints(),
      tier: ints(),
      uptime: ints(),
      workloads: ints(),
      notSimulated: ints(),
      cudaRow: ints(),
      driverRow: ints(),
      minPrice: doubles(),
      maxPrice: doubles(),
      cudaRank: doubles(),
      driverRank: doubles(),
      provenAt: doubles(),
    };
    s.cache.set('accumulators', acc);
  }
  return acc;
}

/**
 * Folds the rows that pass `f` into offers, one per group with a matching row, in the order
 * groups are first met. This is the hot path of a query filtering on machine attributes.
 */
function aggregate(s: Snapshot, f: RowFilter | null): OfferAggregate[] {
  if (f === null) return [];
  const acc = accumulators(s);
  const epoch = ++acc.epoch;
  const { mark, count, busy: accBusy, machines, maxAvailable, maxPer, minBilling: accBilling, tier: accTier, uptime: accUptime, workloads: accWorkloads, notSimulated, cudaRow, driverRow, minPrice, maxPrice: accMaxPrice, cudaRank: accCuda, driverRank: accDriver, provenAt: accProven } = acc;
  const { group, classIdx, regionIdx, price, gpus, busy, minBilling, tier, cudaRank, driverRank, workloads, simulated, provenAt, uptime } = s;
  const { classOk, regionOk, maxPrice, minUptime, workloadBit, minCudaRank, availableOnly, minTier, provenOnly } = f;
  const touched: number[] = [];
  for (const list of f.rowLists) {
    for (let k = 0; k < list.length; k++) {
      const i = list[k]!;
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
      // Before grouping: an offer asked for proven shows only its proven machines.
      const rowProven = provenAt[i]!;
      if (provenOnly && rowProven === NOT_PROVEN) continue;

      const g = group[i]!;
      const rowIdle = rowGpus - rowBusy;
      if (mark[g] !== epoch) {
        mark[g] = epoch;
        touched.push(g);
        count[g] = rowGpus;
        accBusy[g] = rowBusy;
        machines[g] = 1;
        maxAvailable[g] = rowIdle;
        maxPer[g] = rowGpus;
        minPrice[g] = rowPrice;
        accMaxPrice[g] = rowPrice;
        accBilling[g] = minBilling[i]!;
        accTier[g] = rowTier;
        accUptime[g] = rowUptime;
        accCuda[g] = rowCuda;
        cudaRow[g] = i;
        accDriver[g] = driverRank[i]!;
        driverRow[g] = i;
        accWorkloads[g] = rowWorkloads;
        notSimulated[g] = simulated[i] === 0 ? 1 : 0;
        accProven[g] = rowProven;
        continue;
      }
      count[g]! += rowGpus;
      accBusy[g]! += rowBusy;
      machines[g]! += 1;
      if (rowIdle > maxAvailable[g]!) maxAvailable[g] = rowIdle;
      if (rowGpus > maxPer[g]!) maxPer[g] = rowGpus;
      if (rowPrice < minPrice[g]!) minPrice[g] = rowPrice;
      if (rowPrice > accMaxPrice[g]!) accMaxPrice[g] = rowPrice;
      if (minBilling[i]! > accBilling[g]!) accBilling[g] = minBilling[i]!;
      if (rowTier < accTier[g]!) accTier[g] = rowTier;
      if (rowUptime < accUptime[g]!) accUptime[g] = rowUptime;
      if (rowCuda < accCuda[g]!) {
        accCuda[g] = rowCuda;
        cudaRow[g] = i;
      }
      if (driverRank[i]! < accDriver[g]!) {
        accDriver[g] = driverRank[i]!;
        driverRow[g] = i;
      }
      accWorkloads[g]! |= rowWorkloads;
      if (simulated[i] === 0) notSimulated[g] = 1;
      // The oldest proof; `NOT_PROVEN` is below every time, so one unproven machine keeps it.
      if (rowProven < accProven[g]!) accProven[g] = rowProven;
    }
  }
  const out = new Array<OfferAggregate>(touched.length);
  for (let t = 0; t < touched.length; t++) {
    const g = touched[t]!;
    const o = new OfferAggregate(s.groups[g]!);
    o.count = count[g]!;
    o.busy = accBusy[g]!;
    o.machines = machines[g]!;
    o.maxAvailablePerMachine = maxAvailable[g]!;
    o.maxPerMachine = maxPer[g]!;
    o.minPrice = minPrice[g]!;
    o.maxPrice = accMaxPrice[g]!;
    o.minBillingSeconds = accBilling[g]!;
    o.tierRank = accTier[g]!;
    o.uptimeCentiPct = accUptime[g]!;
    o.cudaRank = accCuda[g]!;
    o.cudaVersion = s.cuda[cudaRow[g]!]!;
    o.driverRank = accDriver[g]!;
    o.driverVersion = s.driver[driverRow[g]!]!;
    o.workloads = accWorkloads[g]!;
    o.simulated = notSimulated[g] === 0;
    o.provenAtMs = accProven[g]!;
    out[t] = o;
  }
  return out;
}

/** Every offer, unfiltered, in group order (`all[g].group` is `s.groups[g]`); built once per snapshot. */
function allOffers(s: Snapshot): OfferAggregate[] {
  let all = s.cache.get('all') as OfferAggregate[] | undefined;
  if (all === undefined) {
    all = aggregate(s, rowFilter(s, { availability: 'all', sort: 'price_asc', limit: 1 }));
    s.cache.set('all', all);
  }
  return all;
}

/** The unfiltered offers in one sort's order, built once per snapshot. */
function unfilteredSorted(s: Snapshot, sort: CapacitySort): OfferAggregate[] {
  const cacheKey = `sorted:${sort}`;
  let list = s.cache.get(cacheKey) as OfferAggregate[] | undefined;
  if (list === undefined) {
    list = [...allOffers(s)].sort(comparator(sort));
    s.cache.set(cacheKey, list);
  }
  return list;
}

/** The unfiltered offers grouped by class index and by region index, built once per snapshot. */
function offersBy(s: Snapshot, key: 'classIndex' | 'regionIndex'): OfferAggregate[][] {
  const cacheKey = `by:${key}`;
  let lists = s.cache.get(cacheKey) as OfferAggregate[][] | undefined;
  if (lists === undefined) {
    lists = Array.from({ length: key === 'classIndex' ? s.classes.length : REGIONS.length }, () => []);
    for (const offer of allOffers(s)) lists[offer.group[key]]!.push(offer);
    s.cache.set(cacheKey, lists);
  }
  return lists;
}

/**
 * The unfiltered offers whose farm, class and region pass `f`, taken from the smallest of:
 * the farm's offers, the offers of the classes asked for, the offers of the regions asked for.
 */
function pickOffers(s: Snapshot, f: RowFilter | null): OfferAggregate[] {
  if (f === null) return [];
  const all = allOffers(s);
  let candidates: OfferAggregate[][] = [all];
  let size = all.length;
  if (f.rowEnd - f.rowStart < s.size) {
    // A farm's groups are consecutive: those of its first to its last row.
    const farmOffers = f.rowEnd > f.rowStart ? all.slice(s.group[f.rowStart]!, s.group[f.rowEnd - 1]! + 1) : [];
    candidates = [farmOffers];
    size = farmOffers.length;
  }
  for (const [ok, key] of [[f.classOk, 'classIndex'], [f.regionOk, 'regionIndex']] as const) {
    if (ok === null) continue;
    const lists = offersBy(s, key).filter((_, i) => ok[i] === 1);
    const n = lists.reduce((sum, l) => sum + l.length, 0);
    if (n < size) {
      candidates = lists;
      size = n;
    }
  }
  const out: OfferAggregate[] = [];
  for (const list of candidates) {
    for (const offer of list) {
      const g = offer.group;
      if (f.classOk !== null && f.classOk[g.classIndex] === 0) continue;
      if (f.regionOk !== null && f.regionOk[g.regionIndex] === 0) continue;
      const farmStart = s.farms[g.farmIndex]!.rowStart;
      if (farmStart < f.rowStart || farmStart >= f.rowEnd) continue;
      out.push(offer);
    }
  }
  return out;
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
    // Filters on whole offers pick from the shared unfiltered offers (their JSON is cached
    // too); filters on machines fold the matching rows into fresh offers.
    let offers = isGroupLevel(q) ? pickOffers(s, rowFilter(s, q)) : aggregate(s, rowFilter(s, q));
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

/** The offer's `proof`: proven when every machine is, since the oldest of their proofs. */
function proofOf(o: OfferAggregate): CapacityProof {
  return o.provenAtMs === NOT_PROVEN ? { proven: false, provenAt: null } : { proven: true, provenAt: new Date(o.provenAtMs).toISOString() };
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
    const proof = proofOf(o);
    o.jsonAfterQueue =
      `,"status":"${o.count > o.busy ? 'AVAILABLE' : 'BUSY'}","workloads":${workloadsJsonOf(o.workloads)},"simulated":${o.simulated},` +
      `"proof":{"proven":${proof.proven},"provenAt":${proof.provenAt === null ? 'null' : `"${proof.provenAt}"`}}}`;
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
    proof: proofOf(o),
  };
}
