import type { ApiError, ErrorEnvelope } from '@gpufarm/shared';
import type { FastifyReply, FastifyRequest } from 'fastify';

export function errorEnvelope(err: ApiError, requestId: string): ErrorEnvelope {
  return { error: { code: err.code, message: err.message, requestId, details: err.details } };
}

/** Sends a spec error: status, extra headers (Retry-After…) and the envelope. */
export function sendApiError(request: FastifyRequest, reply: FastifyReply, err: ApiError): FastifyReply {
  for (const [name, value] of Object.entries(err.headers)) reply.header(name, value);
  return reply.code(err.status).type('application/json; charset=utf-8').send(errorEnvelope(err, request.id));
}
