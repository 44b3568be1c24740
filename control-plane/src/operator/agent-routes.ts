import {
  AGENT_MACHINE_DRAIN_PATH,
  AGENT_MACHINE_PATH,
  AGENT_MACHINE_UNENROLL_PATH,
  agentDrainRequestSchema,
  ApiError,
  type AgentMachineView,
  type AgentUnenrollResponse,
} from '@gpufarm/shared';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { requireMachine } from '../auth/machine-tokens.js';
import type { OfferIndex } from '../capacity/offer-index.js';
import type { Database } from '../db/database.js';
import { parseBody } from '../http/parse.js';
import { setMachineDrain } from '../machines/drain.js';
import { unenrollByMachine } from '../machines/unenroll.js';
import { goingPrices } from './market.js';
import { findMachineFacts } from './store.js';
import { operatorMachineView } from './views.js';

/**
 * The operator's actions on the machine itself (`gf-agent status | drain | undrain | unenroll`),
 * authenticated by the machine token like the agent's link: its verdict as the operator area
 * words it, a drain without deadline, and unenrollment (the token stops working, the machine is
 * offered nowhere). Actions are recorded in the audit log with the machine as the actor.
 */
export const agentMachineRoutes: FastifyPluginAsync<{ db: Database; offerIndex: OfferIndex }> = async (app, { db, offerIndex }) => {
  const machine = { config: { auth: 'machine' as const } };

  const authenticated = (request: FastifyRequest) => requireMachine(request, 'The machine token is unknown, or the machine was unenrolled: enroll it again with a new enrollment token.');
  const view = async (id: { machineId: string; farmId: string }): Promise<AgentMachineView> => {
    const facts = await findMachineFacts(db, [id.farmId], id.machineId);
    if (!facts) throw new ApiError('invalid_api_key', 'The machine token is unknown.');
    const row = operatorMachineView(facts, goingPrices(offerIndex.supply()));
    return {
      machineId: row.id,
      farm: { slug: row.farm.slug },
      state: row.state,
      earning: row.earning,
      gpus: row.gpus.map((g) => ({ index: g.index, verdict: g.verdict, reasons: g.reasons })),
      drainRequested: row.drainRequested,
    };
  };

  app.get(AGENT_MACHINE_PATH, machine, async (request) => view(authenticated(request)));

  app.post(AGENT_MACHINE_DRAIN_PATH, machine, async (request) => {
    const id = authenticated(request);
    const body = parseBody(agentDrainRequestSchema, request.body);
    await setMachineDrain(db, { machineId: id.machineId, drain: !body.undrain, deadline: null, reason: body.reason ?? null, actor: { kind: 'machine', id: id.machineId } });
    return view(id);
  });

  app.post(AGENT_MACHINE_UNENROLL_PATH, machine, async (request) => {
    const id = authenticated(request);
    const unenrolledAt = await unenrollByMachine(db, id);
    const response: AgentUnenrollResponse = { machineId: id.machineId, unenrolledAt: unenrolledAt.toISOString() };
    return response;
  });
};
