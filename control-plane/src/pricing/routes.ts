import type { FastifyPluginAsync } from 'fastify';
import type { OfferIndex } from '../capacity/offer-index.js';
import type { Config } from '../config.js';
import { buildPricing } from './summary.js';

export interface PricingRoutesOptions {
  offerIndex: OfferIndex;
  config: Config;
}

/**
 * `GET /v1/pricing` (public): GPU supply and price spread per class, the platform fee, the
 * billing minimums and the payment assets. The body only changes with the offer index's
 * snapshot, so it is serialized once per snapshot.
 */
export const pricingRoutes: FastifyPluginAsync<PricingRoutesOptions> = async (app, { offerIndex, config }) => {
  let cached: { version: number; body: Buffer } | null = null;
  app.get('/v1/pricing', { config: { auth: 'public' } }, async (_request, reply) => {
    const supply = offerIndex.supply();
    if (cached?.version !== offerIndex.version) {
      cached = { version: offerIndex.version, body: Buffer.from(JSON.stringify(buildPricing(supply, config))) };
    }
    return reply.type('application/json; charset=utf-8').send(cached.body);
  });
};
