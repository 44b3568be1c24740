import type { IncomingMessage } from 'node:http';
import { ApiError, errorForField, MAX_BODY_BYTES } from '@gpufarm/shared';
import type { FastifyInstance } from 'fastify';
import { clientGoneError, slowBodyError, watchBodyRate } from './body-rate.js';

/**
 * The path of the first key of `value` that could reach an object's prototype when code merges
 * it (`__proto__`, or `prototype` under `constructor`), or null. `JSON.parse` makes such keys
 * plain own properties, harmless until something copies them with assignment. Walks with a
 * stack of its own: a deeply nested document must not exhaust the call stack.
 */
export function prototypeKeyPath(value: unknown): string | null {
  const pending: Array<{ value: unknown; path: string }> = [{ value, path: '' }];
  while (pending.length > 0) {
    const { value: node, path } = pending.pop()!;
    if (node === null || typeof node !== 'object') continue;
    if (Array.isArray(node)) {
      for (let i = node.length - 1; i >= 0; i--) pending.push({ value: node[i], path: `${path}[${i}]` });
      continue;
    }
    const entries = Object.entries(node);
    for (const [key, item] of entries) {
      const here = path ? `${path}.${key}` : key;
      if (key === '__proto__') return here;
      if (key === 'constructor' && item !== null && typeof item === 'object' && Object.hasOwn(item, 'prototype')) return `${here}.prototype`;
    }
    for (let i = entries.length - 1; i >= 0; i--) {
      const [key, item] = entries[i]!;
      pending.push({ value: item, path: path ? `${path}.${key}` : key });
    }
  }
  return null;
}

/** Reads the whole body under the size limit and the rate floor. */
function readBody(request: { headers: IncomingMessage['headers'] }, payload: IncomingMessage): Promise<Buffer> {
  const declared = request.headers['content-length'];
  if (declared !== undefined && /^\d+$/.test(declared) && Number(declared) > MAX_BODY_BYTES) {
    return Promise.reject(new ApiError('payload_too_large', undefined, { headers: { Connection: 'close' } }));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const fail = (err: unknown) => {
      stopWatching();
      payload.off('data', onData);
      payload.pause();
      reject(err);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) return fail(new ApiError('payload_too_large', undefined, { headers: { Connection: 'close' } }));
      chunks.push(chunk);
    };
    const stopWatching = watchBodyRate(payload, () => fail(slowBodyError()));
    payload.on('data', onData);
    payload.once('error', (err) => fail(clientGoneError(err)));
    payload.once('close', () => {
      if (!payload.complete) fail(clientGoneError());
    });
    payload.once('end', () => {
      stopWatching();
      if (declared !== undefined && Number(declared) !== size) return reject(new ApiError('invalid_request', 'Content-Length does not match the body.'));
      resolve(Buffer.concat(chunks, size));
    });
  });
}

/**
 * The JSON body parser of the API: the 256 KiB limit, the rate floor (408 `request_timeout`
 * for a stalling body), `invalid_json` for what is not JSON, and 422 `validation_error` naming
 * the field for a valid document with a key that reaches a prototype (`__proto__`).
 */
export function installJsonBodies(app: FastifyInstance): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', (request, payload, done) => {
    readBody(request, payload).then(
      (bytes) => {
        const text = bytes.toString('utf8');
        if (text.trim() === '') return done(new ApiError('invalid_json', 'The request body is empty; send a JSON object.'), undefined);
        let value: unknown;
        try {
          value = JSON.parse(text);
        } catch (err) {
          return done(new ApiError('invalid_json', 'The request body is not valid JSON.', { cause: err }), undefined);
        }
        const forbidden = prototypeKeyPath(value);
        if (forbidden) {
          return done(errorForField('validation_error', forbidden, 'is not allowed: keys named __proto__ (or prototype under constructor) are refused', { subject: true }), undefined);
        }
        done(null, value);
      },
      (err: unknown) => done(err as Error, undefined),
    );
  });
}
