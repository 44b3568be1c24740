import { ApiError } from '@gpufarm/shared';
import type { FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import { bearerToken, sameSecret } from '../auth/plugin.js';
import type { Registry } from 'prom-client';
import { UNMATCHED_ROUTE, type ControlPlaneMetrics } from './registry.js';

/**
 * Counts every response by its route pattern (`/v1/jobs/:id`, never the raw URL) and status
 * code, with its duration. Requests no route matched share one label (`unmatched`), so a scan
 * of random paths adds no series.
 */
export const httpMetrics = fp<{ metrics: ControlPlaneMetrics }>(
  async (app, { metrics }) => {
    app.addHook('onResponse', async (request, reply) => {
      metrics.httpRequest({ method: request.method, route: request.routeOptions.url ?? UNMATCHED_ROUTE, code: reply.statusCode }, reply.elapsedTime / 1000);
    });
  },
  { name: 'gpufarm-http-metrics' },
);

/**
 * `GET /metrics` on the API's own port, for deployments that cannot open a second port: it
 * answers only with `Authorization: Bearer <GF_METRICS_TOKEN>` (401 `invalid_api_key` otherwise).
 */
export const metricsRoute: FastifyPluginAsync<{ registry: Registry; token: string }> = async (app, { registry, token }) => {
  app.get('/metrics', { config: { auth: 'public', probe: true } }, async (request, reply) => {
    const sent = bearerToken(request);
    if (typeof sent !== 'string' || !sameSecret(sent, token)) {
      throw new ApiError('invalid_api_key', 'GET /metrics needs "Authorization: Bearer <GF_METRICS_TOKEN>".');
    }
    return reply.type(registry.contentType).header('Cache-Control', 'no-store').send(await registry.metrics());
  });
};
