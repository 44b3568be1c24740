import { REGIONS, regionKeysFor } from '@gpufarm/shared';
import { compareHoldings, NO_HOLDING, type ImageHolders, type ImageHolding, type ImageHoldings } from './image-holdings.js';

/**
 * The matcher's pure core: which machine and which GPUs a queued job gets. No I/O: the store loads the free GPUs into a pool, jobs take
 * from it in queue order, and the store then locks and writes what was planned.
 *
 * A machine fits a job when it has, of one GPU class the job allows, at least `gpu.count` free
 * GPUs with at least the requested memory each, its price is at or under the job's cap, it
 * accepts the job's workload type, has proven its GPUs when the job asks for it (`gpu.proven`)
 * and is not excluded for the job. Among fitting machines the
 * job prefers, in order: its requested region (the key, then the key's region group, then any),
 * the lowest price, the machine that holds the most of the job's image (bytes of its layers,
 * then the exact image: `image-holdings.ts`), the higher benchmark tier, the higher 30-day
 * uptime, then the machine id (a stable tie-break), then the class id. The image comes after
 * region and price: a pull saved never costs the customer a dearer or farther machine.
 */

/** A machine that can be offered jobs (online, farm active, not draining, priced). */
export interface CandidateMachine {
  id: string;
  farmName: string;
  regionKey: string;
  priceMicroUsd: number;
  /** S = 4, A = 3, B = 2, C = 1, not benchmarked = 0: higher is better. */
  tierRank: number;
  /** 30-day uptime in hundredths of a percent. */
  uptimeCentiPct: number;
  /** Workload types it accepts; null: every type. */
  workloads: ReadonlySet<string> | null;
  /** It proved its GPUs with a GPU challenge on real GPUs (`proven_at`). */
  proven: boolean;
}

export interface CandidateGpu {
  index: number;
  uuid: string;
  vramBytes: number;
}

/** The free GPUs of one class on one machine. */
export interface CandidateUnit {
  machine: CandidateMachine;
  classId: string;
  /** Free GPUs, by index ascending. */
  free: CandidateGpu[];
}

/** What a job asks of a machine. */
export interface JobNeed {
  jobId: string;
  gpuCount: number;
  /** Per GPU, bytes; null: any. */
  minVramBytes: number | null;
  /** Allowed GPU class ids; null: any class. */
  classIds: readonly string[] | null;
  capMicroUsd: number;
  workloadType: string;
  /** A region key; null: no preference. */
  regionPreference: string | null;
  /** Machines this job may not go to (they refused or dropped it). */
  excludedMachines: ReadonlySet<string>;
  /** Only machines that proved their GPUs (`gpu.proven`). */
  provenOnly: boolean;
  /** The job's image as matching names it (`imageCacheKey`); null: no image preference. */
  imageKey: string | null;
}

/** One planned match: the unit and the GPUs taken from it (by index ascending). */
export interface PlannedMatch {
  need: JobNeed;
  unit: CandidateUnit;
  gpus: CandidateGpu[];
}

export const TIER_RANK: Readonly<Record<string, number>> = { S: 4, A: 3, B: 2, C: 1 };

/** Orders units best first for the same region rank: price, tier, uptime, machine id, class id. */
export function compareUnits(a: CandidateUnit, b: CandidateUnit): number {
  const x = a.machine;
  const y = b.machine;
  if (x.priceMicroUsd !== y.priceMicroUsd) return x.priceMicroUsd - y.priceMicroUsd;
  if (x.tierRank !== y.tierRank) return y.tierRank - x.tierRank;
  if (x.uptimeCentiPct !== y.uptimeCentiPct) return y.uptimeCentiPct - x.uptimeCentiPct;
  if (x.id !== y.id) return x.id < y.id ? -1 : 1;
  return a.classId < b.classId ? -1 : a.classId > b.classId ? 1 : 0;
}

const groupOf = new Map(REGIONS.map((r) => [r.key, r.group]));

/**
 * The region keys a preference tries, tier by tier: the key itself (or every key of a group
 * name), the other keys of its group, then every other key. An unknown preference is none.
 */
export function regionTiers(preference: string | null, allKeys: readonly string[]): string[][] {
  if (preference === null) return [[...allKeys]];
  // A group name (the capacity filter's other form) prefers every key of the group alike.
  const first = groupOf.has(preference) ? [preference] : regionKeysFor(preference);
  if (first.length === 0) return [[...allKeys]];
  const groups = new Set(first.map((k) => groupOf.get(k)));
  const sameGroup = allKeys.filter((k) => !first.includes(k) && groups.has(groupOf.get(k)));
  const rest = allKeys.filter((k) => !first.includes(k) && !sameGroup.includes(k));
  return [first, sameGroup, rest].filter((tier) => tier.length > 0);
}

interface UnitList {
  units: CandidateUnit[];
  /** Units before `head` have no free GPU left. */
  head: number;
}

/**
 * The free GPUs a matcher may hand out, indexed by class and region with each list sorted best
 * first, so a job's search stops at the first fitting unit of each list. Jobs `take` in queue
 * order; GPUs that could not be locked are simply never given back, those locked but unused
 * (their job lost another of its GPUs) are given back with `giveBack`.
 */
export class CandidatePool {
  private readonly lists = new Map<string, Map<string, UnitList>>();
  private readonly where = new Map<CandidateUnit, { list: UnitList; pos: number }>();
  private readonly regionKeys: string[];
  private readonly tierCache = new Map<string | null, string[][]>();
  /** Each machine's units (the image preference looks a holder's units up). */
  private readonly unitsOf = new Map<string, CandidateUnit[]>();
  /** Who holds how much of each image loaded so far (`addImageHoldings`). */
  private readonly holdings = new Map<string, ImageHolders>();

  constructor(units: readonly CandidateUnit[]) {
    const regions = new Set<string>();
    for (const unit of units) {
      if (unit.free.length === 0) continue;
      let byRegion = this.lists.get(unit.classId);
      if (!byRegion) this.lists.set(unit.classId, (byRegion = new Map()));
      let list = byRegion.get(unit.machine.regionKey);
      if (!list) byRegion.set(unit.machine.regionKey, (list = { units: [], head: 0 }));
      list.units.push(unit);
      regions.add(unit.machine.regionKey);
      const same = this.unitsOf.get(unit.machine.id);
      if (same) same.push(unit);
      else this.unitsOf.set(unit.machine.id, [unit]);
    }
    for (const byRegion of this.lists.values()) {
      for (const list of byRegion.values()) {
        list.units.sort(compareUnits);
        list.units.forEach((unit, pos) => this.where.set(unit, { list, pos }));
      }
    }
    // Catalog order first, so tiers read the same way each run.
    const catalog = REGIONS.map((r) => r.key).filter((k) => regions.has(k));
    this.regionKeys = [...catalog, ...[...regions].filter((k) => !catalog.includes(k)).sort()];
  }

  /** Free GPUs left in the pool. */
  get freeGpus(): number {
    let n = 0;
    for (const unit of this.where.keys()) n += unit.free.length;
    return n;
  }

  /** The machines with units in the pool. */
  machineIds(): string[] {
    return [...this.unitsOf.keys()];
  }

  /** True when the holdings of `imageKey` were added (a key no machine holds is added empty). */
  knowsImage(imageKey: string): boolean {
    return this.holdings.has(imageKey);
  }

  /** Adds who holds how much of each image (`imageHoldings`); `keys` no machine holds are recorded as held by none. */
  addImageHoldings(keys: Iterable<string>, holdings: ImageHoldings): void {
    for (const key of keys) this.holdings.set(key, holdings.get(key) ?? NO_MACHINES_HOLD);
  }

  /** Finds the best fitting unit for `need` and takes its GPUs out of the pool; null when none fits. */
  take(need: JobNeed): PlannedMatch | null {
    let tiers = this.tierCache.get(need.regionPreference);
    if (!tiers) this.tierCache.set(need.regionPreference, (tiers = regionTiers(need.regionPreference, this.regionKeys)));
    const held = need.imageKey === null ? undefined : this.holdings.get(need.imageKey);
    const preferImage = held !== undefined && held.size > 0;
    for (const tier of tiers) {
      let best: Fit | null = null;
      /** Each list's first fitting unit: where the image preference looks for units at the best price. */
      const fits: Fit[] = [];
      for (const [classId, byRegion] of this.lists) {
        if (need.classIds !== null && !need.classIds.includes(classId)) continue;
        for (const region of tier) {
          const list = byRegion.get(region);
          if (!list) continue;
          const found = firstFit(list, need);
          if (!found) continue;
          if (preferImage) fits.push(found);
          if (best === null || compareUnits(found.unit, best.unit) < 0) best = found;
        }
      }
      if (best) {
        const chosen = preferImage ? this.preferHolder(best, fits, held, need, tier) : best;
        const taken = new Set(chosen.gpus);
        chosen.unit.free = chosen.unit.free.filter((g) => !taken.has(g));
        return { need, unit: chosen.unit, gpus: chosen.gpus };
      }
    }
    return null;
  }

  /**
   * Among the units that fit `need` in the region tier `tier` at the best unit's price (the
   * lowest there), the one holding the most of the job's image; the best unit when none holds
   * more. Walks the units at that price from each list's first fitting unit (`fits`: a list
   * whose first fit is dearer has none at that price, and the units before it do not fit), or
   * the image's holders when they are fewer (the cost is the smaller of the two).
   */
  private preferHolder(best: Fit, fits: readonly Fit[], held: ImageHolders, need: JobNeed, tier: readonly string[]): { unit: CandidateUnit; gpus: CandidateGpu[] } {
    const price = best.unit.machine.priceMicroUsd;
    let winner: { unit: CandidateUnit; gpus: CandidateGpu[] } = best;
    let top = held.get(best.unit.machine.id) ?? NO_HOLDING;
    const consider = (unit: CandidateUnit, holding: ImageHolding) => {
      const more = compareHoldings(holding, top);
      if (more < 0 || (more === 0 && compareUnits(unit, winner.unit) >= 0)) return;
      const gpus = gpusFor(unit, need);
      if (gpus === null) return;
      winner = { unit, gpus };
      top = holding;
    };
    let budget = held.size;
    walk: for (const { list, pos } of fits) {
      for (let i = pos; i < list.units.length; i++) {
        const unit = list.units[i]!;
        if (unit.machine.priceMicroUsd > price) break;
        if (--budget < 0) break walk;
        const holding = held.get(unit.machine.id);
        if (holding !== undefined) consider(unit, holding);
      }
    }
    if (budget >= 0) return winner;
    const regions = new Set(tier);
    for (const [machineId, holding] of held) {
      for (const unit of this.unitsOf.get(machineId) ?? []) {
        // A machine's units share its price and region.
        if (unit.machine.priceMicroUsd !== price || !regions.has(unit.machine.regionKey)) break;
        if (need.classIds !== null && !need.classIds.includes(unit.classId)) continue;
        consider(unit, holding);
      }
    }
    return winner;
  }

  /** Puts GPUs taken by a match back (still free, still locked by this matcher). */
  giveBack(unit: CandidateUnit, gpus: readonly CandidateGpu[]): void {
    if (gpus.length === 0) return;
    unit.free = [...unit.free, ...gpus].sort((a, b) => a.index - b.index);
    const at = this.where.get(unit);
    if (at && at.pos < at.list.head) at.list.head = at.pos;
  }
}

/** A list's first unit that fits a job (at `pos`), and the GPUs it would give. */
interface Fit {
  list: UnitList;
  pos: number;
  unit: CandidateUnit;
  gpus: CandidateGpu[];
}

/** The first unit of a sorted list that fits `need`, and the GPUs it would give. */
function firstFit(list: UnitList, need: JobNeed): Fit | null {
  const units = list.units;
  while (list.head < units.length && units[list.head]!.free.length === 0) list.head++;
  for (let i = list.head; i < units.length; i++) {
    const unit = units[i]!;
    const m = unit.machine;
    // Sorted by price first: nothing further down is under the cap.
    if (m.priceMicroUsd > need.capMicroUsd) return null;
    const gpus = gpusFor(unit, need);
    if (gpus !== null) return { list, pos: i, unit, gpus };
  }
  return null;
}

/** The GPUs `unit` would give `need` (its price aside), or null when it does not fit. */
function gpusFor(unit: CandidateUnit, need: JobNeed): CandidateGpu[] | null {
  const m = unit.machine;
  if (unit.free.length < need.gpuCount) return null;
  if (m.workloads !== null && !m.workloads.has(need.workloadType)) return null;
  if (need.provenOnly && !m.proven) return null;
  if (need.excludedMachines.has(m.id)) return null;
  if (need.minVramBytes === null) return unit.free.slice(0, need.gpuCount);
  const gpus: CandidateGpu[] = [];
  for (const gpu of unit.free) {
    if (gpu.vramBytes >= need.minVramBytes) gpus.push(gpu);
    if (gpus.length === need.gpuCount) break;
  }
  return gpus.length < need.gpuCount ? null : gpus;
}

const NO_MACHINES_HOLD: ImageHolders = new Map<string, ImageHolding>();
