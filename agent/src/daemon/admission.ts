import type { AssignmentSpec } from '@gpufarm/shared';
import type { AcceptResult } from '../link/assignment-runner.js';

/** What the machine offers right now, as admission needs it. */
export interface MachineOffer {
  /** UUIDs of the GPUs the machine offers (healthy ones only; simulated ones in simulated mode). */
  gpuUuids: readonly string[];
  /** Free bytes of the work directory's file system, or null when it could not be read. */
  diskFreeBytes: number | null;
  /** Below this the agent takes no new work (`min_free_disk_bytes`). */
  minFreeDiskBytes: number;
}

/**
 * The machine-level checks before the runner takes an assignment (pure): every GPU the
 * assignment names must be one this machine offers, and the work directory must have the free
 * space the operator asked to keep. Returns the refusal, or null to go on to the runner's own
 * checks (duplicates, GPUs in use, container limits).
 *
 * @example admitAssignment(spec, { gpuUuids: ['GPU-sim-l4-24gb-0'], diskFreeBytes: 5e10, minFreeDiskBytes: 2e10 }) // null
 */
export function admitAssignment(spec: AssignmentSpec, offer: MachineOffer): Extract<AcceptResult, { accepted: false }> | null {
  const offered = new Set(offer.gpuUuids);
  const missing = spec.gpus.filter((g) => !offered.has(g.uuid));
  if (missing.length > 0) {
    return { accepted: false, reason: 'gpus_unavailable', message: `this machine does not offer ${missing.map((g) => `GPU ${g.index} (${g.uuid})`).join(', ')}` };
  }
  if (offer.diskFreeBytes !== null && offer.diskFreeBytes < offer.minFreeDiskBytes) {
    return { accepted: false, reason: 'not_ready', message: `the work directory has ${offer.diskFreeBytes} bytes free, below min_free_disk_bytes (${offer.minFreeDiskBytes})` };
  }
  return null;
}
