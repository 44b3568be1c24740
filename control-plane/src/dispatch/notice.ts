/**
 * Messages for a machine's agent travel through PostgreSQL NOTIFY, so the replica holding the
 * agent's WebSocket sends them whichever replica decided. The payload names the assignment; the
 * gateway reads what to send from the database. The matcher publishes `assign` (and execution
 * `cancel`) here; the agent gateway, above both, delivers them.
 */
export const AGENT_DISPATCH_CHANNEL = 'agent_dispatch';

export type DispatchNotice = AssignmentNotice | DrainNotice | ChallengeNotice;

export interface AssignmentNotice {
  machineId: string;
  assignmentId: string;
  /** `assign`: send the assignment; `cancel`: tell the agent to stop it. */
  kind: 'assign' | 'cancel';
  /** For `cancel`: why (shown in the job's log by the agent). */
  reason?: string;
}

/** Send the agent `drain` (or `drain {undrain: true}`): it takes no new assignment until lifted. */
export interface DrainNotice {
  machineId: string;
  kind: 'drain';
  undrain: boolean;
  reason?: string;
}

/**
 * A GPU challenge of the machine (machine-verification): `challenge` sends its
 * `challenge.prepare`; `challenge.cancel` tells the agent to stop it (decided or given up).
 */
export type ChallengeNotice =
  | { machineId: string; kind: 'challenge'; challengeId: string }
  | { machineId: string; kind: 'challenge.cancel'; challengeId: string; reason?: string };
