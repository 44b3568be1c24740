import { createServer, type Server } from 'node:http';
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

/** A listener of its own for Prometheus: `/metrics` and nothing else, no credential (bind it to a private address). */
export interface MetricsListener {
  /** `http://host:port` as bound. */
  url: string;
  close(): Promise<void>;
}

/** Serves `registry` on `host:port` (`GF_METRICS_LISTEN`); port 0 takes a free one. */
export async function startMetricsListener(registry: Registry, address: { host: string; port: number }): Promise<MetricsListener> {
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (path !== '/metrics' || (request.method !== 'GET' && request.method !== 'HEAD')) {
      response.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end('Only GET /metrics is served here.\n');
      return;
    }
    registry.metrics().then(
      (text) => response.writeHead(200, { 'Content-Type': registry.contentType, 'Cache-Control': 'no-store' }).end(request.method === 'HEAD' ? undefined : text),
      (err: unknown) => response.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8' }).end(`metrics could not be collected: ${(err as Error).message}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, address.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = server.address();
  const port = typeof bound === 'object' && bound ? bound.port : address.port;
  return {
    url: `http://${address.host.includes(':') ? `[${address.host}]` : address.host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
