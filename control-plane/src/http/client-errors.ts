import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { ApiError, fieldDetail, SERVICE_VERSION } from '@gpufarm/shared';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorEnvelope, sendApiError } from './envelope.js';
import { clientRequestId } from './request-id.js';

/** The headers every response carries: the request id (a client's own, echoed) and the service version. */
export function stampResponse(request: FastifyRequest, reply: FastifyReply): void {
  reply.header('X-Request-Id', clientRequestId(request.raw) ?? request.id);
  reply.header('Service-Version', SERVICE_VERSION);
}

/** Longest path parameter the router takes (no id of ours comes near it). */
export const MAX_PARAM_LENGTH = 128;

/**
 * fastify's `frameworkErrors`: a URL the router refuses before any route or hook runs (a path
 * segment over `MAX_PARAM_LENGTH`, bad percent-encoding) gets the envelope and the usual headers.
 */
export function answerFrameworkError(err: Error & { code?: string }, request: FastifyRequest, reply: FastifyReply): void {
  stampResponse(request, reply);
  const path = request.url.split('?')[0] ?? '/';
  const apiError =
    err.code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? new ApiError('invalid_request', `A path segment of ${path.slice(0, 80)}… is longer than ${MAX_PARAM_LENGTH} characters; no id is that long.`, {
          details: [fieldDetail('path', `each parameter at most ${MAX_PARAM_LENGTH} characters`)],
        })
      : new ApiError('invalid_request', 'The URL path is not valid (bad percent-encoding).', { details: [fieldDetail('path', 'not a valid URL path')] });
  void sendApiError(request, reply, apiError);
}

/**
 * fastify's `clientErrorHandler`: what Node's HTTP parser refuses before there is a request (a
 * head that did not arrive within `headersTimeout`, a head over the header size limit, bytes
 * that are not HTTP) is answered with the envelope on the raw socket, then the socket closes.
 */
export function answerClientError(this: FastifyInstance, err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const apiError =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? new ApiError('request_timeout', 'The request head did not arrive in time; send the whole request promptly.')
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? new ApiError('invalid_request', 'The request line and headers are larger than the server accepts (16 KiB).', { details: [fieldDetail('headers', 'at most 16 KiB with the request line')] })
        : new ApiError('invalid_request', 'The request is not valid HTTP/1.1.');
  const requestId = this.nextRequestId();
  const body = JSON.stringify(errorEnvelope(apiError, requestId));
  this.log.info({ requestId, err }, 'client error');
  socket.end(
    `HTTP/1.1 ${apiError.status} ${STATUS_CODES[apiError.status]}\r\n` +
      `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `X-Request-Id: ${requestId}\r\nService-Version: ${SERVICE_VERSION}\r\nConnection: close\r\n\r\n${body}`,
  );
}
