import { statSync } from 'node:fs';
import { resolve, sep } from 'node:path';
import fastifyStatic from '@fastify/static';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { isDashboardApi } from '../auth/plugin.js';
import { DASHBOARD_PREFIX } from '../http/route-config.js';

/** Hashed by the build: a new build gets new names, so a browser may keep these forever. */
const IMMUTABLE = 'public, max-age=31536000, immutable';
/** index.html names the current hashed files: a browser asks again each time (a 304 when unchanged). */
const REVALIDATE = 'no-cache';

/**
 * The page's Content-Security-Policy: everything from this origin only, no inline script or
 * style, never framed. `connectOrigins`: where else the app may fetch (the S3 store's presigned
 * downloads).
 */
export function dashboardCsp(connectOrigins: readonly string[]): string {
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "font-src 'self'",
    `connect-src ${["'self'", ...connectOrigins].join(' ')}`,
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "object-src 'none'",
  ].join('; ');
}

const NOT_BUILT = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gpufarm dashboard</title></head>
<body><h1>The dashboard is not built</h1><p>The dashboard is not built: run <code>npm run build -w web</code>, then reload this page.</p></body></html>
`;

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

export interface WebStaticOptions {
  /** The built web app (`index.html`, `assets/`); may not exist yet. */
  dir: string;
  connectOrigins: readonly string[];
}

/**
 * Serves the web app at `/dashboard/`: a file of the build when one matches the path, else
 * `index.html` (the app routes in the browser). `/dashboard/api/…` never falls back to the
 * page: an unknown API path gets the JSON 404 (or 405) like any other. The build is looked
 * for at each request, so building the app needs no restart; without it `/dashboard/` is a
 * 503 page saying how to build it.
 */
export const webStatic: FastifyPluginAsync<WebStaticOptions> = async (app, options) => {
  const root = resolve(options.dir);
  await app.register(fastifyStatic, { root, serve: false, suppressWarning: true });
  const csp = dashboardCsp(options.connectOrigins);
  const pageHeaders = (reply: FastifyReply) =>
    reply.header('Content-Security-Policy', csp).header('X-Content-Type-Options', 'nosniff').header('Referrer-Policy', 'no-referrer');
  const route = { config: { auth: 'public' as const, webFile: true as const } };

  app.get(DASHBOARD_PREFIX, route, async (_request, reply) => reply.redirect(`${DASHBOARD_PREFIX}/`, 301));

  app.get<{ Params: { '*': string } }>(`${DASHBOARD_PREFIX}/*`, route, async (request, reply) => {
    if (isDashboardApi(request.url)) return reply.callNotFound();
    const index = resolve(root, 'index.html');
    if (!isFile(index)) return pageHeaders(reply).code(503).header('Cache-Control', REVALIDATE).type('text/html; charset=utf-8').send(NOT_BUILT);
    const wanted = request.params['*'];
    const file = wanted ? resolve(root, wanted) : index;
    if (file.startsWith(root + sep) && isFile(file)) {
      const name = file.slice(root.length + 1);
      reply.header('Cache-Control', name.startsWith(`assets${sep}`) ? IMMUTABLE : REVALIDATE);
      if (name.endsWith('.html')) pageHeaders(reply);
      else reply.header('X-Content-Type-Options', 'nosniff');
      return reply.sendFile(name, { cacheControl: false });
    }
    return pageHeaders(reply).header('Cache-Control', REVALIDATE).sendFile('index.html', { cacheControl: false });
  });
};
