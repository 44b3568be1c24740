import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/** A client's own `X-Request-Id` is echoed when it is this sane; otherwise one is generated. */
const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

declare module 'fastify' {
  interface FastifyInstance {
    /** A new server request id, for answers written outside a request (raw sockets, refused upgrades). */
    nextRequestId(): string;
  }
}

/**
 * The server's request ids (`req_` + 20 base-62 characters), one source per app, used as
 * fastify's `genReqId`, in its logs and in error bodies. A client's `X-Request-Id` is echoed
 * in the response header and logged beside it (`clientRequestId`), never taken as the server's
 * id: a client cannot make two requests share one id in the logs, nor forge another's.
 */
export function createRequestIdGenerator(): () => string {
  // Random bytes are drawn 4 KiB at a time: one system call per ~200 ids rather than one per id.
  let pool = Buffer.alloc(0);
  let offset = 0;
  return () => {
    if (offset + 20 > pool.length) {
      pool = randomBytes(4096);
      offset = 0;
    }
    let id = 'req_';
    for (let i = 0; i < 20; i++) id += BASE62[pool[offset + i]! % 62];
    offset += 20;
    return id;
  };
}

/** The value echoed in the `X-Request-Id` response header. */
export function clientRequestId(raw: IncomingMessage): string | undefined {
  const header = raw.headers['x-request-id'];
  return typeof header === 'string' && CLIENT_REQUEST_ID.test(header) ? header : undefined;
}
