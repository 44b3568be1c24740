import type { FastifyPluginAsync } from 'fastify';
import { OPERATOR_API_PREFIX } from '../auth/plugin.js';
import { earningsRoutes } from './earnings-routes.js';
import { farmRoutes } from './farm-routes.js';
import { machineRoutes } from './machine-routes.js';
import { marketRoutes } from './market-routes.js';
import type { OperatorRouteDeps, OperatorRoutesOptions } from './request.js';
import { tokenRoutes } from './token-routes.js';

export type { OperatorRoutesOptions };

/**
 * The operator area's API under `/operator/api` (the session of a farm's payout wallet or of a
 * wallet the farm lists). Everything is scoped to the session's farms: another farm's machine,
 * token or earnings answers 404 `not_found`, as if it did not exist. Every write is recorded in
 * the audit log with the session's wallet. Adding and removing operator wallets is the payout
 * wallet's alone. Each group's handlers parse, call a use case or a read, and shape the answer.
 */
export const operatorRoutes: FastifyPluginAsync<OperatorRoutesOptions> = async (app, options) => {
  const deps: OperatorRouteDeps = { ...options, base: OPERATOR_API_PREFIX, session: { config: { auth: 'operator_session' as const } } };
  machineRoutes(app, deps);
  earningsRoutes(app, deps);
  marketRoutes(app, deps);
  tokenRoutes(app, deps);
  farmRoutes(app, deps);
};
