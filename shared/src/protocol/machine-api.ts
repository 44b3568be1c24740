import { z } from 'zod';
import { earningVerdictSchema } from '../fleet/earning.js';

/**
 * The agent's own view of its machine over HTTP (machine token): what `gf-agent status` prints,
 * and the operator's actions taken on the machine itself (`gf-agent drain | undrain | unenroll`).
 */

export const AGENT_MACHINE_PATH = '/agent/v1/machine';
export const AGENT_MACHINE_DRAIN_PATH = '/agent/v1/machine/drain';
export const AGENT_MACHINE_UNENROLL_PATH = '/agent/v1/machine/unenroll';

/** `GET /agent/v1/machine`. */
export const agentMachineViewSchema = z.object({
  machineId: z.string(),
  farm: z.object({ slug: z.string() }),
  state: z.string(),
  earning: earningVerdictSchema,
  gpus: z.array(z.object({ index: z.int().min(0), verdict: z.enum(['healthy', 'warning', 'failed']), reasons: z.array(z.string()) })),
  drainRequested: z.boolean(),
});
export type AgentMachineView = z.infer<typeof agentMachineViewSchema>;

/** `POST /agent/v1/machine/drain`: drain (no new job; running ones finish) or lift it. */
export const agentDrainRequestSchema = z.strictObject({
  undrain: z.boolean(),
  reason: z.string().min(1).max(500).optional(),
});
export type AgentDrainRequest = z.infer<typeof agentDrainRequestSchema>;

/** `POST /agent/v1/machine/unenroll` answer: the machine token no longer works. */
export const agentUnenrollResponseSchema = z.object({ machineId: z.string(), unenrolledAt: z.string() });
export type AgentUnenrollResponse = z.infer<typeof agentUnenrollResponseSchema>;
