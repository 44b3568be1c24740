import type { Readable } from 'node:stream';
import { ApiError, fieldDetail } from '@gpufarm/shared';

/**
 * The floor a request body must keep, like nginx's `client_body_timeout` and Kestrel's minimum
 * data rate: a body that brings less than `MIN_BODY_BYTES_PER_WINDOW` in a window of
 * `BODY_WINDOW_MS` is cut, so a client trickling one byte every few seconds cannot hold a
 * connection and a handler for ever. 8 KiB per 10 s refuses no real upload.
 */
export const BODY_WINDOW_MS = 10_000;
export const MIN_BODY_BYTES_PER_WINDOW = 8 * 1024;

/** 408 `request_timeout` for a body under the floor; the connection closes after the answer. */
export function slowBodyError(windowMs = BODY_WINDOW_MS, minBytes = MIN_BODY_BYTES_PER_WINDOW): ApiError {
  return new ApiError('request_timeout', `The request body arrived too slowly: less than ${minBytes} bytes in ${windowMs / 1000} s. Send it again on a faster connection.`, {
    details: [fieldDetail('body', `at least ${minBytes} bytes per ${windowMs / 1000} s`)],
    headers: { Connection: 'close' },
  });
}

export interface BodyRateOptions {
  windowMs?: number;
  minBytes?: number;
  /** True while the reader, not the client, holds the body back (backpressure): that window does not count. */
  readerIsBehind?: () => boolean;
}

/**
 * Counts the bytes of `body` per window and calls `onSlow` once when a window brought less than
 * the floor; stops by itself when the body ends, errors or closes. Answers a function that stops it.
 */
export function watchBodyRate(body: Readable, onSlow: () => void, options: BodyRateOptions = {}): () => void {
  const windowMs = options.windowMs ?? BODY_WINDOW_MS;
  const minBytes = options.minBytes ?? MIN_BODY_BYTES_PER_WINDOW;
  let bytes = 0;
  const count = (chunk: Buffer) => {
    bytes += chunk.length;
  };
  const timer = setInterval(() => {
    const slow = bytes < minBytes && !options.readerIsBehind?.();
    bytes = 0;
    if (slow) {
      stop();
      onSlow();
    }
  }, windowMs);
  timer.unref();
  const stop = () => {
    clearInterval(timer);
    body.off('data', count);
    body.off('end', stop);
    body.off('close', stop);
    body.off('error', stop);
  };
  // A 'data' listener also starts a paused stream: callers attach theirs in the same tick.
  body.on('data', count);
  body.once('end', stop);
  body.once('close', stop);
  body.once('error', stop);
  return stop;
}

/** 400 `invalid_request` for a body whose client went away before it ended: nobody reads it, and it is not the server's fault. */
export function clientGoneError(cause?: unknown): ApiError {
  return new ApiError('invalid_request', 'The client closed the connection before the body ended.', { cause });
}
