/**
 * Labels the runtime puts on every container it creates, so a restarted agent finds its
 * containers again. `owner` names the agent instance (the machine id): an agent only ever
 * lists, restores or removes containers carrying its own owner label.
 */
export const LABEL_MANAGED = 'org.gpufarm.managed';
export const LABEL_OWNER = 'org.gpufarm.owner';
export const LABEL_ASSIGNMENT = 'org.gpufarm.assignment';
export const LABEL_JOB = 'org.gpufarm.job';
export const LABEL_MAX_RUNTIME = 'org.gpufarm.max-runtime-seconds';
/** An egress network or proxy (`egress/network.ts`), valued `network` or `proxy`: no job container. */
export const LABEL_EGRESS = 'org.gpufarm.egress';
/** A GPU challenge's container (`challenge/container-challenge.ts`): no assignment owns it, so a restarted agent removes it. */
export const LABEL_CHALLENGE = 'org.gpufarm.challenge';

/** The labels of one assignment's container. */
export function assignmentLabels(owner: string, assignmentId: string, jobId: string, maxRuntimeSeconds: number): Record<string, string> {
  return {
    [LABEL_MANAGED]: 'true',
    [LABEL_OWNER]: owner,
    [LABEL_ASSIGNMENT]: assignmentId,
    [LABEL_JOB]: jobId,
    [LABEL_MAX_RUNTIME]: String(maxRuntimeSeconds),
  };
}

/** Docker `filters` for every container of this owner. */
export function ownerFilter(owner: string): { label: string[] } {
  return { label: [`${LABEL_MANAGED}=true`, `${LABEL_OWNER}=${owner}`] };
}

/** The container name of an assignment: stable, so a second create of the same assignment fails. */
export function containerName(owner: string, assignmentId: string): string {
  return `gf-${owner}-${assignmentId}`.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 200);
}

/** The labels of a GPU challenge's container: this agent's, for no assignment. */
export function challengeLabels(owner: string, challengeId: string): Record<string, string> {
  return { [LABEL_MANAGED]: 'true', [LABEL_OWNER]: owner, [LABEL_CHALLENGE]: challengeId };
}
