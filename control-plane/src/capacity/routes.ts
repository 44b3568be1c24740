import { errorForField } from '@gpufarm/shared';
import type { FastifyPluginAsync } from 'fastify';
import type { OfferIndex } from './offer-index.js';
import { MODEL_PARAMETER_MESSAGE, parseCapacityQuery } from './query.js';

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
  /**
   * The last body sent: requests for the same serialized page within the same millisecond of
   * `generatedAt` get the same bytes, without copying the page (up to a few hundred KiB) again.
   */
  let last: { dataJson: Buffer; nextCursor: string | null; generatedAt: string; body: Buffer } | null = null;
  app.get('/v1/capacity', { config: { auth: 'public' } }, async (request, reply) => {
    const query = parseCapacityQuery(request.query);
    // A derived class id is well formed by its shape alone: it names a class once a machine reported one.
    if (query.model !== undefined && offerIndex.gpuClass(query.model) === undefined) throw errorForField('invalid_request', 'model', MODEL_PARAMETER_MESSAGE);
    const page = offerIndex.listOffersJson(query);
    const generatedAt = now().toISOString();
    if (last === null || last.dataJson !== page.dataJson || last.nextCursor !== page.nextCursor || last.generatedAt !== generatedAt) {
      const nextCursor = page.nextCursor === null ? 'null' : JSON.stringify(page.nextCursor);
      const body = Buffer.concat([
        Buffer.from(`{"object":"list","chainId":${chainId},"generatedAt":"${generatedAt}","data":`),
        page.dataJson,
        Buffer.from(`,"nextCursor":${nextCursor}}`),
      ]);
      last = { dataJson: page.dataJson, nextCursor: page.nextCursor, generatedAt, body };
    }
    return reply.type('application/json; charset=utf-8').send(last.body);
  });
};
