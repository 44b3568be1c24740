import type { FastifyPluginAsync } from 'fastify';
import type { OfferIndex } from './offer-index.js';
import { parseCapacityQuery } from './query.js';

export interface CapacityRoutesOptions {
  offerIndex: OfferIndex;
  chainId: number;
  /** The clock behind `generatedAt`. */
  now?: () => Date;
}

/**
 * `GET /v1/capacity` (public): the capacity offers matching the query, one keyset page. The
 * body is assembled as bytes around the index's serialized page rather than by fastify's
 * serializer, which would walk up to 500 offer objects per request.
 */
export const capacityRoutes: FastifyPluginAsync<CapacityRoutesOptions> = async (app, { offerIndex, chainId, now = () => new Date() }) => {
  app.get('/v1/capacity', { config: { auth: 'public' } }, async (request, reply) => {
    const query = parseCapacityQuery(request.query);
    const page = offerIndex.listOffersJson(query);
    const nextCursor = page.nextCursor === null ? 'null' : JSON.stringify(page.nextCursor);
    const body = Buffer.concat([
      Buffer.from(`{"object":"list","chainId":${chainId},"generatedAt":"${now().toISOString()}","data":`),
      page.dataJson,
      Buffer.from(`,"nextCursor":${nextCursor}}`),
    ]);
    return reply.type('application/json; charset=utf-8').send(body);
  });
};
