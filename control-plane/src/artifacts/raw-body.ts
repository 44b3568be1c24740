import type { IncomingMessage } from 'node:http';
import { PassThrough, type Readable } from 'node:stream';
import { ApiError, fieldDetail } from '@gpufarm/shared';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { clientGoneError, slowBodyError, watchBodyRate } from '../http/body-rate.js';

/**
 * Streamed uploads. The API's 256 KiB body limit belongs to JSON bodies; an artifact upload
 * reads its body itself, from the socket into the blob store, under its own limit.
 */

/**
 * Makes the routes of the (encapsulated) plugin `app` receive their bodies unread, whatever
 * the Content-Type: fastify's parsers and its body limit do not apply to them.
 */
export function takeRawBodies(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined));
}

/**
 * The request's body as a stream for the blob store. Piped, not `pipeline`d: when the store
 * refuses the body (too large) only this stream is destroyed, the connection stays and the
 * refusal can be answered. A client that goes away before the body ended (even before this is
 * called) errors the stream with a 400 `invalid_request`: nobody is left to read the answer,
 * and it is the client's doing, not the server's. A body that stalls under the rate floor
 * (`http/body-rate.ts`) errors it with a 408 `request_timeout`.
 */
export function bodyStream(raw: IncomingMessage): Readable {
  const body = new PassThrough({ highWaterMark: 1024 * 1024 });
  // The consumer learns of a failure from the errored stream when it attaches (`pipeline`);
  // until then an abort must not be an uncaught 'error' that ends the process.
  body.on('error', () => undefined);
  const abort = (cause?: unknown) => {
    if (raw.complete) return;
    body.destroy(clientGoneError(cause));
  };
  if (raw.destroyed) {
    abort();
    return body;
  }
  raw.once('error', abort);
  raw.once('close', () => abort());
  // A stalling client is cut (408); a store that holds the body back (backpressure) is not the client's doing.
  watchBodyRate(raw, () => {
    raw.unpipe(body);
    raw.pause();
    body.destroy(slowBodyError());
  }, { readerIsBehind: () => body.writableNeedDrain || raw.isPaused() });
  raw.pipe(body);
  return body;
}

/** 413 `payload_too_large` for an upload over `maxBytes`; the connection closes after it. */
export function tooLarge(maxBytes: number, what: string): ApiError {
  return new ApiError('payload_too_large', `The ${what} is larger than its limit of ${maxBytes} bytes.`, {
    details: [fieldDetail('body', `at most ${maxBytes} bytes`)],
    headers: { Connection: 'close' },
  });
}

/** Refuses at once (with `refusal()`) a body whose declared Content-Length passes `maxBytes`. */
export function checkDeclaredLength(request: FastifyRequest, maxBytes: number, refusal: () => ApiError): void {
  const header = request.headers['content-length'];
  if (header !== undefined && /^\d+$/.test(header) && Number(header) > maxBytes) throw refusal();
}

/** A declared SHA-256 (`X-Content-Sha256`), lower-cased; null when absent; 400 when malformed. */
export function declaredSha256(value: string | string[] | undefined, where: 'header' | 'trailer'): string | null {
  if (value === undefined) return null;
  if (typeof value !== 'string' || !/^[0-9a-fA-F]{64}$/.test(value.trim())) {
    throw new ApiError('invalid_request', `The X-Content-Sha256 ${where} must be 64 hex digits.`, {
      details: [fieldDetail('X-Content-Sha256', 'must be 64 hex digits', { subject: true })],
    });
  }
  return value.trim().toLowerCase();
}
