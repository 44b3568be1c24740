import { ApiError } from '@gpufarm/shared';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { setFarmMachinePrice } from '../farms/prices.js';
import { decodeCursor, encodeCursor } from '../http/cursor.js';
import { parseBody, parseParams, parseQuery } from '../http/parse.js';
import { setMachineDrain } from '../machines/drain.js';
import { HISTORY_RANGES, machineHistory } from '../machines/history.js';
import { machineStartTimes } from '../phases/figures.js';
import { goingPrices } from './market.js';
import { actorOf, farmsOf, idCursor, ids, listQuery, machineParams, priceField, scope, usdPrice, type OperatorRouteDeps } from './request.js';
import { findMachineFacts, listMachineFacts, recentMachineJobs, type MachineFactsRow } from './store.js';
import { iso, operatorMachineView } from './views.js';

const historyQuery = z.strictObject({ range: z.enum(HISTORY_RANGES, { message: `must be one of ${HISTORY_RANGES.join(', ')}` }).default('24h') });
const machinePriceBody = z.strictObject({ pricePerGpuHour: usdPrice });
const drainBody = z.strictObject({ reason: z.string().min(1).max(500).nullable().optional() });

/** The farms' machines: the list, one machine's page, its price, and the operator's drain. */
export function machineRoutes(app: FastifyInstance, { db, offerIndex, base, session }: OperatorRouteDeps): void {
  const machineOf = async (request: FastifyRequest): Promise<MachineFactsRow> => {
    const { id } = parseParams(machineParams, request.params);
    const machine = await findMachineFacts(db, ids(farmsOf(request)), id);
    if (!machine) throw new ApiError('not_found', `No machine ${id}.`);
    return machine;
  };

  app.get(`${base}/machines`, session, async (request) => {
    const query = parseQuery(listQuery, request.query, 'GET /operator/api/machines');
    const after = query.cursor ? decodeCursor(query.cursor, idCursor).id : null;
    const rows = await listMachineFacts(db, { farmIds: ids(scope(request, query.farm)), afterId: after, limit: query.limit + 1 });
    const page = rows.slice(0, query.limit);
    const going = goingPrices(offerIndex.supply());
    return { data: page.map((m) => operatorMachineView(m, going)), nextCursor: rows.length > query.limit ? encodeCursor({ id: page.at(-1)!.id }) : null };
  });

  app.get(`${base}/machines/:id`, session, async (request) => {
    const machine = await machineOf(request);
    const { range } = parseQuery(historyQuery, request.query, 'GET /operator/api/machines/:id');
    const [recentJobs, history, startTimes] = await Promise.all([recentMachineJobs(db, machine.id), machineHistory(db, machine.id, range), machineStartTimes(db, machine.id)]);
    return {
      machine: operatorMachineView(machine, goingPrices(offerIndex.supply())),
      probe: { state: machine.probeState, output: machine.probeOutput },
      recentJobs: recentJobs.map((j) => ({ jobId: j.jobId, status: j.status, startedAt: iso(j.startedAt), finishedAt: iso(j.finishedAt), failureCode: j.failureCode })),
      startTimes,
      history,
    };
  });

  app.put(`${base}/machines/:id/price`, session, async (request) => {
    const { id } = parseParams(machineParams, request.params);
    const body = parseBody(machinePriceBody, request.body);
    const price = priceField(body.pricePerGpuHour);
    await setFarmMachinePrice(db, { farmIds: ids(farmsOf(request)), machineId: id, price, actor: actorOf(request) });
    return { machineId: id, pricePerGpuHourMicroUsd: price };
  });

  // An operator's drain has no deadline: running jobs finish however long they take.
  for (const [action, drain] of [['drain', true], ['undrain', false]] as const) {
    app.post(`${base}/machines/:id/${action}`, session, async (request) => {
      const machine = await machineOf(request);
      const body = parseBody(drainBody, request.body ?? {});
      await setMachineDrain(db, { machineId: machine.id, drain, deadline: null, reason: body.reason ?? null, actor: actorOf(request) });
      const after = await findMachineFacts(db, [machine.farmId], machine.id);
      return operatorMachineView(after!, goingPrices(offerIndex.supply()));
    });
  }
}
