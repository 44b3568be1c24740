import {
  accountListSchema,
  adminJobSchema,
  adminFarmListSchema,
  adminMachineDetailSchema,
  adminMachineListSchema,
  auditListSchema,
  disputeListSchema,
  drainStateSchema,
  earningsSchema,
  enrollmentTokenCreatedSchema,
  enrollmentTokenListSchema,
  farmOperatorListSchema,
  fleetEventListSchema,
  fleetOverviewSchema,
  machineHistorySchema,
  marketSchema,
  operatorMachineDetailSchema,
  operatorMachineListSchema,
  operatorJobSchema,
  priceSetSchema,
  requestedImagesSchema,
  resolvedDisputeSchema,
  withdrawalListSchema,
} from '@gpufarm/shared';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import type { z } from 'zod';

/**
 * The fleet contract's answers by route: each successful answer of these routes that a route test
 * reads through `contractChecked` is parsed with the schema the web app parses it with.
 */
const ANSWERS: ReadonlyArray<{ method: string; path: RegExp; schema: z.ZodType }> = [
  { method: 'GET', path: /^\/admin\/api\/fleet\/overview$/, schema: fleetOverviewSchema },
  { method: 'GET', path: /^\/admin\/api\/machines$/, schema: adminMachineListSchema },
  { method: 'GET', path: /^\/admin\/api\/machines\/[^/]+$/, schema: adminMachineDetailSchema },
  { method: 'GET', path: /^\/admin\/api\/machines\/[^/]+\/history$/, schema: machineHistorySchema },
  { method: 'POST', path: /^\/admin\/api\/machines\/[^/]+\/(drain|undrain|cordon|uncordon)$/, schema: drainStateSchema },
  { method: 'GET', path: /^\/admin\/api\/events$/, schema: fleetEventListSchema },
  { method: 'GET', path: /^\/admin\/api\/audit$/, schema: auditListSchema },
  { method: 'GET', path: /^\/admin\/api\/farms$/, schema: adminFarmListSchema },
  { method: 'GET', path: /^\/admin\/api\/disputes$/, schema: disputeListSchema },
  { method: 'GET', path: /^\/admin\/api\/jobs\/[^/]+$/, schema: adminJobSchema },
  { method: 'POST', path: /^\/admin\/api\/jobs\/[^/]+\/resolve-dispute$/, schema: resolvedDisputeSchema },
  { method: 'GET', path: /^\/admin\/api\/accounts$/, schema: accountListSchema },
  { method: 'GET', path: /^\/operator\/api\/machines$/, schema: operatorMachineListSchema },
  { method: 'GET', path: /^\/operator\/api\/machines\/[^/]+$/, schema: operatorMachineDetailSchema },
  { method: 'GET', path: /^\/operator\/api\/market$/, schema: marketSchema },
  { method: 'GET', path: /^\/operator\/api\/requested-images$/, schema: requestedImagesSchema },
  { method: 'GET', path: /^\/operator\/api\/enrollment-tokens$/, schema: enrollmentTokenListSchema },
  { method: 'POST', path: /^\/operator\/api\/enrollment-tokens$/, schema: enrollmentTokenCreatedSchema },
  { method: 'PUT', path: /^\/operator\/api\/prices$/, schema: priceSetSchema },
  { method: 'GET', path: /^\/operator\/api\/earnings$/, schema: earningsSchema },
  { method: 'GET', path: /^\/operator\/api\/jobs\/[^/]+$/, schema: operatorJobSchema },
  { method: 'GET', path: /^\/operator\/api\/withdrawals$/, schema: withdrawalListSchema },
  { method: 'GET', path: /^\/operator\/api\/farms\/[^/]+\/operators$/, schema: farmOperatorListSchema },
];

/**
 * Parses a successful answer of a contract route with its schema: true when it did, false for an
 * answer outside the table or an error; a breach throws with what differs.
 */
export function checkFleetAnswer(method: string, url: string, res: Pick<LightMyRequestResponse, 'statusCode' | 'body'>): boolean {
  const path = new URL(url, 'http://localhost').pathname;
  const schema = ANSWERS.find((a) => a.method === method.toUpperCase() && a.path.test(path))?.schema;
  if (schema === undefined || res.statusCode >= 300) return false;
  const parsed = schema.safeParse(JSON.parse(res.body));
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new Error(`${method} ${path}: the answer breaks the fleet contract (shared/src/fleet/api.ts): ${issues}`);
  }
  return true;
}

/**
 * `app` whose `inject` checks each fleet answer against the contract (`checkFleetAnswer`): a
 * breach rejects the call, failing the test that made it; `checked()` counts the answers parsed.
 */
export function contractChecked<T extends FastifyInstance>(app: T): { app: T; checked: () => number } {
  let checked = 0;
  const inject = async (options: InjectOptions): Promise<LightMyRequestResponse> => {
    const res = await app.inject(options);
    if (checkFleetAnswer(options.method ?? 'GET', typeof options.url === 'string' ? options.url : '', res)) checked += 1;
    return res;
  };
  const proxy = new Proxy(app, {
    get(target, prop) {
      if (prop === 'inject') return inject;
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { app: proxy, checked: () => checked };
}
