import { GPU_CLASSES, WORKLOAD_TYPES, type WorkloadType } from '@gpufarm/shared';
import { ALL_WORKLOADS, WORKLOAD_BIT, type Snapshot } from './snapshot.js';

/** What a job needs of one machine. */
export interface JobRequirements {
  gpuCount: number;
  /** Minimum memory per GPU in bytes; null: any. */
  minVramBytes: number | null;
  /** Allowed GPU class ids; null: any class. */
  classIds: readonly string[] | null;
  workloadType: WorkloadType;
}

/** An offered machine that could run the job. */
export interface FittingMachine {
  classId: string;
  priceMicroUsd: number;
  minBillingSeconds: number;
}

/**
 * Offered machines that fit the whole job on their own (enough GPUs of an allowed class with
 * enough memory, accepting the workload), busy or not: a funded job queues for them. Pure.
 */
export function fittingMachines(s: Snapshot, req: JobRequirements): FittingMachine[] {
  const wanted = (WORKLOAD_BIT.get(req.workloadType) ?? 1 << WORKLOAD_TYPES.length) | ALL_WORKLOADS;
  const fits: FittingMachine[] = [];
  for (let row = 0; row < s.size; row++) {
    if (s.gpus[row]! < req.gpuCount || (s.workloads[row]! & wanted) === 0) continue;
    const gpuClass = GPU_CLASSES[s.classIdx[row]!]!;
    if (req.minVramBytes !== null && gpuClass.vramBytes < req.minVramBytes) continue;
    if (req.classIds !== null && !req.classIds.includes(gpuClass.classId)) continue;
    fits.push({ classId: gpuClass.classId, priceMicroUsd: s.price[row]!, minBillingSeconds: s.minBilling[row]! });
  }
  return fits;
}
