import { AGENT_ENROLL_PATH, ApiError, enrollRequestSchema, type EnrollResponse } from '@gpufarm/shared';
import type { FastifyPluginAsync } from 'fastify';
import type { Database } from '../db/database.js';
import { parseBody } from '../http/parse.js';
import { simulatedRefusal } from '../machine-verification/claims.js';
import { enrollMachine } from './enrollment.js';

/**
 * `POST /agent/v1/enroll`: the agent spends its one-time enrollment token (in the body, so the
 * route needs no API key) and gets its machine id and token. A malformed body is 400
 * `invalid_request` naming the field; an unknown, used or expired token is 401 `invalid_api_key`;
 * a simulated machine on a deployment that does not allow them is 403 `forbidden` naming the
 * setting, and its token stays unspent.
 */
export const agentRoutes: FastifyPluginAsync<{ db: Database; heartbeatSeconds: number; allowSimulated: boolean }> = async (app, { db, heartbeatSeconds, allowSimulated }) => {
  app.post(AGENT_ENROLL_PATH, { config: { auth: 'public' } }, async (request, reply) => {
    const body = parseBody(enrollRequestSchema, request.body);
    const refused = simulatedRefusal(body.inventory.simulated, allowSimulated);
    if (refused !== null) throw new ApiError('forbidden', `The machine cannot enroll: ${refused}.`);
    const enrolled = await enrollMachine(db, body);
    if (!enrolled) throw new ApiError('invalid_api_key', 'The enrollment token is unknown, was already used, or expired. Ask the operator for a new one (npm run admin -- create-enrollment-token).');
    const response: EnrollResponse = { machineId: enrolled.machineId, machineToken: enrolled.machineToken, heartbeatIntervalSeconds: heartbeatSeconds };
    return reply.code(201).send(response);
  });
};
