import type { AssignmentSpec } from '@gpufarm/shared';
import type { ChallengeSpec } from '../challenge/challenge.js';
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

/** What the machine is doing, as a GPU challenge's admission needs it. */
export interface ChallengeAdmission {
  /** Assignments the daemon holds (running, or finished and not yet reported). */
  heldAssignments: readonly string[];
  draining: boolean;
  /** The challenge running now, or null. */
  activeChallengeId: string | null;
  /** Whether the machine runs simulated GPUs; null before the first inventory read. */
  simulated: boolean | null;
  /** Why the machine is unhealthy, or null when it is healthy. */
  unhealthyReason: string | null;
  /** UUIDs of the GPUs the machine offers. */
  gpuUuids: readonly string[];
}

/**
 * Whether the machine takes a GPU challenge now (pure): only with its GPUs idle (no assignment
 * held, no other challenge), not draining, healthy, and only for GPUs it offers, simulated or
 * real as it is. Returns the refusal (`challenge.failed`'s reason), or null to run it.
 *
 * @example admitChallenge(spec, { ...idleMachine, heldAssignments: ['asg_1'] }) // 'a job holds the GPUs (assignment asg_1)'
 */
export function admitChallenge(spec: Pick<ChallengeSpec, 'gpus' | 'simulated'>, machine: ChallengeAdmission): string | null {
  if (machine.activeChallengeId !== null) return `another GPU challenge (${machine.activeChallengeId}) is running on this machine`;
  if (machine.heldAssignments.length > 0) return `a job holds the GPUs (assignment ${machine.heldAssignments.join(', ')})`;
  if (machine.draining) return 'the machine is draining and takes no new work';
  if (machine.simulated === null) return 'the machine has not read its inventory yet';
  if (machine.unhealthyReason !== null) return `the machine is unhealthy: ${machine.unhealthyReason}`;
  if (spec.simulated !== machine.simulated) return spec.simulated ? 'this machine has real GPUs, not simulated ones' : 'this machine runs simulated GPUs: it has no real GPU to challenge';
  const offered = new Set(machine.gpuUuids);
  const missing = spec.gpus.filter((g) => !offered.has(g.uuid));
  if (missing.length > 0) return `this machine does not offer ${missing.map((g) => `GPU ${g.index} (${g.uuid})`).join(', ')}`;
  return null;
}

/** The refusal of an assignment that arrives while a GPU challenge runs: a challenge never runs beside a job. */
export function refusalDuringChallenge(challengeId: string): Extract<AcceptResult, { accepted: false }> {
  return { accepted: false, reason: 'gpus_unavailable', message: `a GPU challenge (${challengeId}) is running on this machine's GPUs; it takes no assignment until the challenge ends` };
}
