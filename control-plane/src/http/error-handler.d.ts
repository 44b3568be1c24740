import { ApiError } from '@gpufarm/shared';
import type { FastifyInstance } from 'fastify';
import type { RouteTable } from './route-table.js';
/** Maps an error thrown anywhere in a request to a spec error; nothing else reaches the client. */
export declare function toApiError(err: unknown): ApiError;
/**
 * Error envelope for every failure, `not_found` for unknown paths and `method_not_allowed`
 * for a known path with the wrong method.
 */
export declare function installErrorHandling(app: FastifyInstance, routes: RouteTable): void;
