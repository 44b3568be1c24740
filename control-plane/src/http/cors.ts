import { ApiError } from '@gpufarm/shared';
import type { FastifyInstance } from 'fastify';
import { sendApiError } from './envelope.js';
import { webAreaOf } from './route-config.js';
import type { RouteTable } from './route-table.js';

/** The web app and its APIs are same-origin only: the /v1 routes the dashboard serves again get no CORS there. */
function inWebArea(path: string): boolean {
  return webAreaOf(path) !== null;
}

/**
 * Browsers may read public GETs (capacity, pricing, the index) cross-origin. Every other
 * route, and above all every write, sends no CORS header, and its preflight gets none either:
 * the browser then refuses the cross-origin call. Under the web areas nothing is cross-origin.
 */
export function installCors(app: FastifyInstance, routes: RouteTable): void {
  app.addHook('onRequest', async (request, reply) => {
    if (request.routeOptions.config.auth === 'public' && (request.method === 'GET' || request.method === 'HEAD') && !inWebArea(request.url)) {
      reply.header('Access-Control-Allow-Origin', '*');
      reply.header('Access-Control-Expose-Headers', 'X-Request-Id, Service-Version, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After');
    }
  });

  app.options('/*', { config: { auth: 'public' } }, async (request, reply) => {
    const path = request.url.split('?')[0] ?? '/';
    if (routes.find('GET', path)?.auth === 'public' && !inWebArea(path)) {
      return reply
        .code(204)
        .header('Access-Control-Allow-Origin', '*')
        .header('Access-Control-Allow-Methods', 'GET, HEAD')
        .header('Access-Control-Allow-Headers', 'Authorization, X-Request-Id')
        .header('Access-Control-Max-Age', '600')
        .send();
    }
    const allowed = routes.methodsFor(path);
    if (allowed.length === 0) return sendApiError(request, reply, new ApiError('not_found', `No route for OPTIONS ${path}.`));
    reply.header('Allow', allowed.join(', '));
    return sendApiError(request, reply, new ApiError('method_not_allowed', `OPTIONS is not allowed for ${path}; allowed: ${allowed.join(', ')}.`));
  });
}
