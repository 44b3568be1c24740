import type { FastifyPluginAsync } from 'fastify';
import type { Config } from './config.js';
/** `GET /v1`: what this deployment is and where everything lives. */
export declare const indexRoutes: FastifyPluginAsync<{
    config: Config;
}>;
/** `GET /docs`: the API reference shipped with this version, as Markdown. */
export declare const docsRoutes: FastifyPluginAsync;
