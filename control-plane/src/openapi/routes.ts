import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { ApiError } from '@gpufarm/shared';
import type { FastifyPluginAsync } from 'fastify';
import type { Config } from '../config.js';
import { ASSETS_DIR } from '../package-files.js';
import { buildOpenApiDocument, DOCUMENTED_ROUTES, openApiPath } from './document.js';

const SWAGGER_UI_DIR = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

/** The reference page's own files; nothing is loaded from another origin. */
const ASSETS = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
} as const;

/**
 * Scripts and styles from this origin only, no inline script, no framing. Swagger UI sets
 * element styles through the DOM (allowed) and shows its logo as a data: image.
 */
export const DOCS_CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const INIT_SCRIPT = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({ url: '/v1/openapi.json', dom_id: '#swagger-ui', deepLinking: false, validatorUrl: null, syntaxHighlight: { theme: 'obsidian' } });
});
`;

const escapeHtml = (text: string) => text.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);

/** The page: Swagger UI from local files, and the route list for a reader without JavaScript. */
function docsPage(): string {
  const rows = DOCUMENTED_ROUTES.map((r) => `<li><code>${r.method.toUpperCase()} ${escapeHtml(openApiPath(r.path))}</code>: ${escapeHtml(r.summary)}</li>`).join('\n');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>gpufarm API reference</title>
<link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png">
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
<link rel="stylesheet" href="/docs/assets/docs-page.css">
</head>
<body>
<div id="swagger-ui"></div>
<noscript>
<h1>gpufarm API reference</h1>
<p>The OpenAPI 3.1 document: <a href="/v1/openapi.json">/v1/openapi.json</a>.</p>
<ul>
${rows}
</ul>
</noscript>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/init.js"></script>
</body>
</html>
`;
}

/**
 * `GET /v1/openapi.json` (public): the OpenAPI 3.1 document, built from the routes' zod schemas
 * once per public URL (its `servers`). `GET /docs`: the reference page rendering it, with its assets under
 * `/docs/assets/`.
 */
export const openApiRoutes: FastifyPluginAsync<{ config: Pick<Config, 'publicUrl'> }> = async (app, { config }) => {
  // Serialized once per public URL, which with PORT=0 is known only once the server listens.
  let built = { publicUrl: '', body: '' };
  const documentOf = (publicUrl: string) => {
    if (built.publicUrl !== publicUrl) built = { publicUrl, body: JSON.stringify(buildOpenApiDocument(publicUrl)) };
    return built.body;
  };
  const page = docsPage();
  const assets = new Map<string, { type: string; bytes: Buffer | string }>([['init.js', { type: 'text/javascript; charset=utf-8', bytes: INIT_SCRIPT }]]);
  for (const [name, type] of Object.entries(ASSETS)) assets.set(name, { type, bytes: await readFile(join(SWAGGER_UI_DIR, name)) });
  assets.set('docs-page.css', { type: 'text/css; charset=utf-8', bytes: await readFile(join(ASSETS_DIR, 'docs-page.css')) });

  app.get('/v1/openapi.json', { config: { auth: 'public' } }, async (_request, reply) => reply.type('application/json; charset=utf-8').send(documentOf(config.publicUrl)));

  app.get('/docs', { config: { auth: 'public' } }, async (_request, reply) =>
    reply.type('text/html; charset=utf-8').header('Content-Security-Policy', DOCS_CONTENT_SECURITY_POLICY).header('X-Content-Type-Options', 'nosniff').send(page));

  app.get<{ Params: { name: string } }>('/docs/assets/:name', { config: { auth: 'public' } }, async (request, reply) => {
    const asset = assets.get(request.params.name);
    if (!asset) throw new ApiError('not_found', `No asset ${request.params.name} on the reference page.`);
    return reply.type(asset.type).header('X-Content-Type-Options', 'nosniff').header('Cache-Control', 'public, max-age=3600').send(asset.bytes);
  });
};
