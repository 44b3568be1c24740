import { ApiError } from '@gpufarm/shared';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { addFarmOperatorWallet, removeFarmOperatorWallet } from '../farms/operators.js';
import { listFarmOperators } from '../farms/store.js';
import { parseBody, parseParams } from '../http/parse.js';
import { actorOf, farmOf, farmParams, type OperatorRouteDeps } from './request.js';
import { iso } from './views.js';

const walletField = z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte hex address');
const operatorParams = farmParams.extend({ wallet: walletField });
const operatorBody = z.strictObject({ wallet: walletField });

/** The wallets a farm lists as its operators: any of the farm's wallets reads them, its payout wallet alone changes them. */
export function farmRoutes(app: FastifyInstance, { db, base, session }: OperatorRouteDeps): void {
  const payoutFarm = (request: FastifyRequest) => {
    const farm = farmOf(request);
    if (farm.role !== 'payout') throw new ApiError('forbidden', `Only the farm's payout wallet (${farm.payoutAddress}) adds and removes operator wallets.`);
    return farm;
  };

  app.get(`${base}/farms/:id/operators`, session, async (request) => {
    const farm = farmOf(request);
    return { data: (await listFarmOperators(db, farm.id)).map((o) => ({ wallet: o.wallet, addedAt: iso(o.addedAt) })) };
  });

  app.post(`${base}/farms/:id/operators`, session, async (request, reply) => {
    const farm = payoutFarm(request);
    const wallet = parseBody(operatorBody, request.body).wallet.toLowerCase();
    const added = await addFarmOperatorWallet(db, { farm, wallet, actor: actorOf(request) });
    return reply.code(added ? 201 : 200).send({ farmId: farm.id, wallet });
  });

  app.delete(`${base}/farms/:id/operators/:wallet`, session, async (request, reply) => {
    const farm = payoutFarm(request);
    const wallet = parseParams(operatorParams, request.params).wallet.toLowerCase();
    await removeFarmOperatorWallet(db, { farm, wallet, actor: actorOf(request) });
    return reply.code(204).send();
  });
}
