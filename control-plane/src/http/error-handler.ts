import { ApiError, fieldDetail, GpufarmError, isErrorCode } from '@gpufarm/shared';
import type { FastifyError, FastifyInstance } from 'fastify';
import { isDatabaseUnavailable } from '../db/errors.js';
import { sendApiError } from './envelope.js';
import type { RouteTable } from './route-table.js';

/**
 * Maps an error thrown anywhere in a request to a spec error; nothing else reaches the client.
 * A core error whose code is a spec code keeps its message and details; any other is internal.
 */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof GpufarmError && isErrorCode(err.code)) return new ApiError(err.code, err.message, { details: err.details, cause: err });
  if (isDatabaseUnavailable(err)) return new ApiError('unavailable', 'The database is unavailable. Retry later.', { cause: err });
  const code = (err as FastifyError | undefined)?.code;
  switch (code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new ApiError('invalid_json', 'The request body is not valid JSON.', { cause: err });
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError('invalid_json', 'The request body is empty; send a JSON object.', { cause: err });
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError('payload_too_large', undefined, { cause: err });
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError('invalid_request', 'Content-Type must be application/json.', {
        cause: err,
        details: [fieldDetail('Content-Type', 'must be application/json', { subject: true })],
      });
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ApiError('invalid_request', 'Content-Length does not match the body.', { cause: err });
    default:
      break;
  }
  if (err instanceof SyntaxError && (err as FastifyError).statusCode === 400) {
    return new ApiError('invalid_json', 'The request body is not valid JSON.', { cause: err });
  }
  return new ApiError('internal', undefined, { cause: err });
}

/**
 * Error envelope for every failure, `not_found` for unknown paths and `method_not_allowed`
 * for a known path with the wrong method.
 */
export function installErrorHandling(app: FastifyInstance, routes: RouteTable): void {

  app.setErrorHandler((err, request, reply) => {
    const apiError = toApiError(err);
    if (apiError.status >= 500) request.log.error({ err: apiError.cause ?? apiError }, 'request failed');
    return sendApiError(request, reply, apiError);
  });

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '/';
    const allowed = routes.methodsFor(path).filter((m) => m !== request.method);
    if (allowed.length > 0) {
      reply.header('Allow', allowed.join(', '));
      return sendApiError(request, reply, new ApiError('method_not_allowed', `${request.method} is not allowed for ${path}; allowed: ${allowed.join(', ')}.`));
    }
    return sendApiError(request, reply, new ApiError('not_found', `No route for ${request.method} ${path}.`));
  });
}
