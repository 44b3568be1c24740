import { createHash } from 'node:crypto';
import type { CookieSerializeOptions } from '@fastify/cookie';
import type { FastifyInstance, FastifyRequest } from 'fastify';

/** A cookie of the web app: its name and the attributes it is set (and cleared) with. */
export interface WebCookie {
  name: string;
  options: CookieSerializeOptions;
}

/** The web app's cookies: the session's, and the browser cookie a sign-in nonce is bound to. */
export interface WebCookies {
  /** Its value is the session's only credential. */
  session: WebCookie;
  /** A random value per browser, set with each sign-in nonce: the nonce is usable from that browser only. */
  browser: WebCookie;
}

/**
 * The cookies as the deployment's public URL serves them. Over HTTPS each is a `__Host-` cookie
 * (Secure, Path=/, no Domain): no other host, no subdomain and no plain-http page can set or
 * overwrite it. Over plain http (local development) the same cookies without the prefix and
 * without Secure: Chromium and Firefox accept Secure cookies from http://localhost, but Safari
 * does not, nor does any browser from another http host. Both are HttpOnly and SameSite=Strict.
 */
export function webCookies(publicUrl: string): WebCookies {
  const https = publicUrl.startsWith('https:');
  const options: CookieSerializeOptions = { path: '/', httpOnly: true, sameSite: 'strict', secure: https };
  const name = (base: string) => (https ? `__Host-${base}` : base);
  return { session: { name: name('gf_session'), options }, browser: { name: name('gf_browser'), options } };
}

/** The value of `cookie` the request carried, if any. */
export function cookieOf(app: FastifyInstance, request: FastifyRequest, cookie: WebCookie): string | null {
  return (request.headers.cookie ? app.parseCookie(request.headers.cookie)[cookie.name] : undefined) ?? null;
}

/** The stored form of a cookie value: only its SHA-256 is kept, so a database read gives no cookie away. */
export function hashCookieValue(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}
