import type { FastifyContextConfig, FastifyInstance } from 'fastify';
import { type HTTPMethod } from 'find-my-way';
export declare const HTTP_METHODS: HTTPMethod[];
/**
 * A second router holding every route's method, path pattern and config. It answers "does
 * this path exist for another method?" (405 vs 404) and "is this a public GET?" (CORS).
 */
export interface RouteTable {
    find(method: HTTPMethod, path: string): FastifyContextConfig | undefined;
    methodsFor(path: string): HTTPMethod[];
}
/** Must be called before any route is added: it records routes as they are registered. */
export declare function recordRoutes(app: FastifyInstance): RouteTable;
