import { ApiError, type ErrorEnvelope } from '@gpufarm/shared';
import type { FastifyReply, FastifyRequest } from 'fastify';
export declare function errorEnvelope(err: ApiError, requestId: string): ErrorEnvelope;
/** Sends a spec error: status, extra headers (Retry-After…) and the envelope. */
export declare function sendApiError(request: FastifyRequest, reply: FastifyReply, err: ApiError): FastifyReply;
