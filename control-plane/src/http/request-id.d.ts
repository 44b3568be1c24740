import type { IncomingMessage } from 'node:http';
export declare function generateRequestId(): string;
/** The value echoed in the `X-Request-Id` response header. */
export declare function clientRequestId(raw: IncomingMessage): string | undefined;
/**
 * fastify's `genReqId`: the id used in logs and in error bodies. Bodies always carry the
 * `req_<id>` form, so a client value without the prefix gets it prepended there.
 */
export declare function requestIdFor(raw: IncomingMessage): string;
