import { WORKLOAD_TYPES, type WorkloadType } from '@gpufarm/shared';
import { ALL_WORKLOADS, NOT_PROVEN, WORKLOAD_BIT, type Snapshot } from './snapshot.js';

/** What a job needs of one machine, and the most it pays. */
export interface JobRequirements {
  gpuCount: number;
  /** Minimum memory per GPU in bytes; null: any. */
  minVramBytes: number | null;
  /** Allowed GPU class ids; null: any class. */
  classIds: readonly string[] | null;
  workloadType: WorkloadType;
  /** Price cap per GPU-hour, micro-USD; null: no cap (every fitting machine matches). */
  capMicroUsd: number | null;
  /** Only machines that proved their GPUs (`gpu.proven`). */
  provenOnly: boolean;
}

/** The offered machines that fit a job, and those of them at or under its cap. */
export interface FitSummary {
  /** Machines that fit the whole job, at any price. */
  fitting: number;
  /** Their highest price; 0 when none fits. */
  maxFittingPriceMicroUsd: number;
  /** Their lowest price; 0 when none fits. */
  minFittingPriceMicroUsd: number;
  /** Fitting machines at or under the cap, and their lowest and highest price and minimum billing. */
  matched: number;
  minPriceMicroUsd: number;
  maxPriceMicroUsd: number;
  maxMinBillingSeconds: number;
  /** Classes of the matched machines, in the snapshot's class order (catalog order, then derived classes by id). */
  matchedClasses: string[];
}

/**
 * One scan over the snapshot's machine rows: machines that fit the whole job on their own
 * (enough GPUs of an allowed class with enough memory, accepting the workload, proven when the
 * job asks for it), busy or not, since a funded job queues for them. Pure; allocates nothing per row.
 */
export function summarizeFit(s: Snapshot, req: JobRequirements): FitSummary {
  const wanted = (WORKLOAD_BIT.get(req.workloadType) ?? 1 << WORKLOAD_TYPES.length) | ALL_WORKLOADS;
  const allowed = s.classes.map((c) => (req.classIds === null || req.classIds.includes(c.classId)) && (req.minVramBytes === null || c.vramBytes >= req.minVramBytes));
  const cap = req.capMicroUsd ?? Number.POSITIVE_INFINITY;
  const matchedClass = new Uint8Array(s.classes.length);
  const out: FitSummary = {
    fitting: 0,
    maxFittingPriceMicroUsd: 0,
    minFittingPriceMicroUsd: 0,
    matched: 0,
    minPriceMicroUsd: 0,
    maxPriceMicroUsd: 0,
    maxMinBillingSeconds: 0,
    matchedClasses: [],
  };
  for (let row = 0; row < s.size; row++) {
    const classIndex = s.classIdx[row]!;
    if (!allowed[classIndex] || s.gpus[row]! < req.gpuCount || (s.workloads[row]! & wanted) === 0) continue;
    if (req.provenOnly && s.provenAt[row] === NOT_PROVEN) continue;
    const price = s.price[row]!;
    out.minFittingPriceMicroUsd = out.fitting === 0 ? price : Math.min(out.minFittingPriceMicroUsd, price);
    out.maxFittingPriceMicroUsd = Math.max(out.maxFittingPriceMicroUsd, price);
    out.fitting += 1;
    if (price > cap) continue;
    out.minPriceMicroUsd = out.matched === 0 ? price : Math.min(out.minPriceMicroUsd, price);
    out.maxPriceMicroUsd = Math.max(out.maxPriceMicroUsd, price);
    out.maxMinBillingSeconds = Math.max(out.maxMinBillingSeconds, s.minBilling[row]!);
    out.matched += 1;
    matchedClass[classIndex] = 1;
  }
  out.matchedClasses = s.classes.filter((_, i) => matchedClass[i] === 1).map((c) => c.classId);
  return out;
}
