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
  /** When no machine fits: why not, for a person (`noFitReasons`); empty otherwise. */
  noFitReasons: string[];
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
    noFitReasons: [],
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
  if (out.fitting === 0) out.noFitReasons = noFitReasons(s, req);
  return out;
}

const gb = (bytes: number) => Math.floor(bytes / 2 ** 30);

/**
 * Why no offered machine fits the job, the first requirement that rules every machine out,
 * checked in the order a person relaxes them: the classes, the memory per GPU, the GPUs on one
 * machine, the workload, proven GPUs. A second scan, run only when nothing fits.
 */
export function noFitReasons(s: Snapshot, req: JobRequirements): string[] {
  if (s.size === 0) return ['no machine is offered on the market now'];
  const wanted = (WORKLOAD_BIT.get(req.workloadType) ?? 1 << WORKLOAD_TYPES.length) | ALL_WORKLOADS;
  const named = req.classIds === null ? '' : ` of ${req.classIds.join(' or ')}`;
  let ofClass = 0;
  let maxVramBytes = 0;
  let maxGpus = 0;
  let workloadRefused = false;
  let unproven = false;
  for (let row = 0; row < s.size; row++) {
    const c = s.classes[s.classIdx[row]!]!;
    if (req.classIds !== null && !req.classIds.includes(c.classId)) continue;
    ofClass += 1;
    maxVramBytes = Math.max(maxVramBytes, c.vramBytes);
    if (req.minVramBytes !== null && c.vramBytes < req.minVramBytes) continue;
    maxGpus = Math.max(maxGpus, s.gpus[row]!);
    if (s.gpus[row]! < req.gpuCount) continue;
    if ((s.workloads[row]! & wanted) === 0) workloadRefused = true;
    else if (req.provenOnly && s.provenAt[row] === NOT_PROVEN) unproven = true;
  }
  if (ofClass === 0) return [`no machine${named} is offered now`];
  if (req.minVramBytes !== null && maxVramBytes < req.minVramBytes) {
    return [`the most memory per GPU offered${named} is ${gb(maxVramBytes)} GB; the job asks at least ${gb(req.minVramBytes)} GB (gpu.minimumVramGb)`];
  }
  if (maxGpus < req.gpuCount) return [`machines${named}${req.minVramBytes !== null ? ' with enough memory' : ''} have at most ${maxGpus} GPU(s) each; the job asks ${req.gpuCount} on one machine (gpu.count)`];
  if (workloadRefused && !unproven) return [`the machines that fit do not take ${req.workloadType} jobs (workloadType)`];
  if (unproven) return ['no machine that fits has proven its GPUs (gpu.proven)'];
  return [];
}
