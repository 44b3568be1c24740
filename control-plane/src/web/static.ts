import { statSync } from 'node:fs';
import { resolve, sep } from 'node:path';
import fastifyStatic from '@fastify/static';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { isWebApi } from '../auth/plugin.js';
import { ADMIN_PREFIX, DASHBOARD_PREFIX, OPERATOR_PREFIX } from '../http/route-config.js';

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

  const notBuilt = (reply: FastifyReply) => pageHeaders(reply).code(503).header('Cache-Control', REVALIDATE).type('text/html; charset=utf-8').send(NOT_BUILT);
  const indexPage = (reply: FastifyReply) => pageHeaders(reply).header('Cache-Control', REVALIDATE).sendFile('index.html', { cacheControl: false });

  for (const prefix of [DASHBOARD_PREFIX, OPERATOR_PREFIX, ADMIN_PREFIX]) app.get(prefix, route, async (_request, reply) => reply.redirect(`${prefix}/`, 301));

  // The operator and admin areas are pages of the same app: every path there is its index.html
  // (the files are under /dashboard/), except the areas' APIs and the admin-token API.
  for (const prefix of [OPERATOR_PREFIX, ADMIN_PREFIX]) {
    app.get(`${prefix}/*`, route, async (request, reply) => {
      if (isWebApi(request.url) || request.url.startsWith(`${ADMIN_PREFIX}/v1/`)) return reply.callNotFound();
      return isFile(resolve(root, 'index.html')) ? indexPage(reply) : notBuilt(reply);
    });
  }

  app.get<{ Params: { '*': string } }>(`${DASHBOARD_PREFIX}/*`, route, async (request, reply) => {
    if (isWebApi(request.url)) return reply.callNotFound();
    if (!isFile(resolve(root, 'index.html'))) return notBuilt(reply);
    const index = resolve(root, 'index.html');
    const wanted = request.params['*'];
    const file = wanted ? resolve(root, wanted) : index;
    if (file.startsWith(root + sep) && isFile(file)) {
      const name = file.slice(root.length + 1);
      reply.header('Cache-Control', name.startsWith(`assets${sep}`) ? IMMUTABLE : REVALIDATE);
      if (name.endsWith('.html')) pageHeaders(reply);
      else reply.header('X-Content-Type-Options', 'nosniff');
      return reply.sendFile(name, { cacheControl: false });
    }
    return indexPage(reply);
  });
};
