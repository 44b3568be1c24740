import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import { devWallet, HOST, siweMessage, type SiweSigner } from './web.js';

/**
 * Calls of the real server over real sockets (node:http, which lets a test set `Host`), one
 * connection per call unless the response is kept open.
 */

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  /** The body as JSON (throws when it is not). */
  json(): unknown;
}

/** The base URL the app listens on (it must be listening). */
export function baseOf(app: FastifyInstance): string {
  const { port } = app.server.address() as AddressInfo;
  return `http://127.0.0.1:${port}`;
}

/** One call on its own connection; resolves with the whole answer. */
export function call(base: string, options: { method?: string; path: string; headers?: Record<string, string>; body?: unknown }): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
    const req = httpRequest(
      `${base}${options.path}`,
      {
        method: options.method ?? 'GET',
        agent: false,
        headers: { ...(payload === undefined ? {} : { 'content-type': 'application/json' }), ...options.headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: () => JSON.parse(text) as unknown });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** A response kept open (a live log stream): its status and headers, and a way to drop it. */
export interface HeldResponse {
  status: number;
  res: IncomingMessage;
  /** Resolves once the connection is closed (by either side). */
  closed: Promise<void>;
  /** The whole body, once it ended (never, for a stream that stays open). */
  body: Promise<string>;
  drop(): void;
}

/** Opens `path` on its own connection and keeps the response open. */
export function hold(base: string, path: string, headers: Record<string, string>): Promise<HeldResponse> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${base}${path}`, { agent: false, headers }, (res) => {
      const socket = res.socket;
      const closed = new Promise<void>((done) => (socket.destroyed ? done() : socket.once('close', () => done())));
      res.on('error', () => {});
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      const body = new Promise<string>((done) => res.on('end', () => done(Buffer.concat(chunks).toString())));
      resolve({ status: res.statusCode ?? 0, res, closed, body, drop: () => req.destroy() });
    });
    req.on('error', reject);
    req.end();
  });
}

export interface SocketSession {
  cookie: string;
  csrfToken: string;
}

/** Signs in to the dashboard over sockets as `signer` (nonce, SIWE message, signature): the session cookie and CSRF token. */
export async function signInOverSockets(base: string, signer: SiweSigner = devWallet(1)): Promise<SocketSession> {
  const nonce = await call(base, { method: 'POST', path: '/dashboard/api/auth/nonce', headers: { host: HOST } });
  if (nonce.status !== 201) throw new Error(`nonce answered ${nonce.status}: ${nonce.text}`);
  const message = siweMessage(signer.address, (nonce.json() as { nonce: string }).nonce);
  // The nonce is bound to the browser that asked for it: its browser cookie goes with the sign-in.
  const browser = (nonce.headers['set-cookie'] ?? []).find((c) => c.startsWith('gf_browser='))?.split(';')[0];
  if (!browser) throw new Error('the nonce set no gf_browser cookie');
  const res = await call(base, { method: 'POST', path: '/dashboard/api/auth/sign-in', headers: { host: HOST, cookie: browser }, body: { message, signature: await signer.signMessage(message) } });
  if (res.status !== 200) throw new Error(`sign-in answered ${res.status}: ${res.text}`);
  const setCookie = (res.headers['set-cookie'] ?? []).find((c) => c.startsWith('gf_session='));
  if (!setCookie) throw new Error('sign-in set no gf_session cookie');
  return { cookie: setCookie.slice('gf_session='.length).split(';')[0]!, csrfToken: (res.json() as { csrfToken: string }).csrfToken };
}

/** Headers of a dashboard call with the session (and its CSRF token for writes). */
export function sessionHeaders(s: SocketSession, options: { csrf?: boolean } = {}): Record<string, string> {
  return { host: HOST, cookie: `gf_session=${s.cookie}`, ...(options.csrf ? { 'x-csrf-token': s.csrfToken } : {}) };
}
