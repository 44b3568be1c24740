import type { FastifyContextConfig, FastifyInstance } from 'fastify';
import FindMyWay, { type HTTPMethod } from 'find-my-way';

export const HTTP_METHODS: HTTPMethod[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/**
 * A second router holding every route's method, path pattern and config. It answers "does
 * this path exist for another method?" (405 vs 404) and "is this a public GET?" (CORS).
 */
export interface RouteTable {
  find(method: HTTPMethod, path: string): FastifyContextConfig | undefined;
  methodsFor(path: string): HTTPMethod[];
  /** Every recorded route as `{ method, url }`, in registration order (HEAD routes included). */
  list(): { method: HTTPMethod; url: string }[];
}

/** Must be called before any route is added: it records routes as they are registered. */
export function recordRoutes(app: FastifyInstance): RouteTable {
  const router = FindMyWay({ ignoreTrailingSlash: false });
  const recorded: { method: HTTPMethod; url: string }[] = [];
  app.addHook('onRoute', (route) => {
    if (route.url.includes('*')) return;
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods.map((m) => m.toUpperCase() as HTTPMethod)) {
      if (router.hasRoute(method, route.url)) continue;
      router.on(method, route.url, () => {}, route.config ?? {});
      recorded.push({ method, url: route.url });
    }
  });
  return {
    find(method, path) {
      const found = router.find(method, path);
      return found ? ((found.store ?? {}) as FastifyContextConfig) : undefined;
    },
    methodsFor(path) {
      return HTTP_METHODS.filter((m) => router.find(m, path));
    },
    list() {
      return [...recorded];
    },
  };
}
