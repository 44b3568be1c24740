import { errorForField } from '@gpufarm/shared';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { setFarmClassPrice } from '../farms/prices.js';
import { farmPricesByClass } from '../farms/store.js';
import { intParam, parseBody, parseQuery } from '../http/parse.js';
import { goingPrices } from './market.js';
import { requestedImages } from './requested-images.js';
import { actorOf, farmQuery, farmSlug, ids, priceField, scope, usdPrice, type OperatorRouteDeps } from './request.js';
import { queuedJobsByClass } from './store.js';

const requestedImagesQuery = z.strictObject({ farm: farmSlug.optional(), days: intParam(1, 30, 7), limit: intParam(1, 100, 20) });
const classPriceBody = z.strictObject({ farm: farmSlug, classId: z.string().min(1).max(64), pricePerGpuHour: usdPrice });

/** The market the farms sell into: going prices per class beside theirs, the images customers ask for, and their class prices. */
export function marketRoutes(app: FastifyInstance, { db, offerIndex, base, session }: OperatorRouteDeps): void {
  app.get(`${base}/market`, session, async (request) => {
    const query = parseQuery(farmQuery, request.query, 'GET /operator/api/market');
    const farms = scope(request, query.farm);
    const [yours, queued] = await Promise.all([farmPricesByClass(db, ids(farms)), queuedJobsByClass(db)]);
    const going = new Map(goingPrices(offerIndex.supply()).map((g) => [g.classId, g]));
    return {
      data: yours.map(({ classId, minPrice }) => {
        const market = going.get(classId);
        return {
          classId,
          label: offerIndex.gpuClass(classId)?.label ?? classId,
          gpusOnline: market?.gpusOnline ?? 0,
          gpusBusy: market?.gpusBusy ?? 0,
          jobsQueued: queued.get(classId) ?? 0,
          minPerGpuHourMicroUsd: market?.minPerGpuHourMicroUsd ?? null,
          medianPerGpuHourMicroUsd: market?.medianPerGpuHourMicroUsd ?? null,
          maxPerGpuHourMicroUsd: market?.maxPerGpuHourMicroUsd ?? null,
          yourPricePerGpuHourMicroUsd: minPrice,
        };
      }),
    };
  });

  // The market's most requested images, with how many of the farms' machines hold each: what to pre-pull.
  app.get(`${base}/requested-images`, session, async (request) => {
    const query = parseQuery(requestedImagesQuery, request.query, 'GET /operator/api/requested-images');
    return requestedImages(db, { days: query.days, limit: query.limit, farmIds: ids(scope(request, query.farm)) });
  });

  app.put(`${base}/prices`, session, async (request) => {
    const body = parseBody(classPriceBody, request.body);
    const [farm] = scope(request, body.farm);
    // Curated classes and the derived ones machines have reported.
    if (!offerIndex.gpuClass(body.classId)) throw errorForField('invalid_request', 'classId', `unknown GPU class ${body.classId}`, { subject: true });
    const price = priceField(body.pricePerGpuHour);
    const machines = await setFarmClassPrice(db, { farm: farm!, classId: body.classId, price, actor: actorOf(request) });
    return { farm: farm!.slug, classId: body.classId, machines: machines.length, pricePerGpuHourMicroUsd: price };
  });
}
