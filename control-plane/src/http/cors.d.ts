import type { FastifyInstance } from 'fastify';
import type { RouteTable } from './route-table.js';
/**
 * Browsers may read public GETs (capacity, pricing, the index) cross-origin. Every other
 * route, and above all every write, sends no CORS header, and its preflight gets none either:
 * the browser then refuses the cross-origin call.
 */
export declare function installCors(app: FastifyInstance, routes: RouteTable): void;
