import { rmSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { s3PublicOrigin } from '../src/artifacts/s3-blob-store.js';
import { loadConfig } from '../src/config.js';
import { WEB_DIST_DIR } from '../src/package-files.js';
import { dashboardCsp } from '../src/web/static.js';
import { assertError } from './helpers/assert.js';
import { buildWebTestApp } from './helpers/web.js';

const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'";

t.test('default: the page, its hashed assets and the SPA fallback', async (t) => {
  const { app } = await buildWebTestApp(t);
  for (const url of ['/dashboard/', '/dashboard/jobs/job_123', '/dashboard/sign-in?next=%2Fdashboard%2Fkeys', '/dashboard/assets/missing-000.js']) {
    const res = await app.inject({ url });
    t.equal(res.statusCode, 200, url);
    t.match(res.body, /<div id="root">/, `${url}: index.html`);
    t.match(res.headers['content-type'], /^text\/html/);
    t.equal(res.headers['cache-control'], 'no-cache');
    t.equal(res.headers['content-security-policy'], CSP);
    t.equal(res.headers['x-content-type-options'], 'nosniff');
    t.equal(res.headers['referrer-policy'], 'no-referrer');
    t.equal(res.headers['access-control-allow-origin'], undefined, 'no CORS');
  }
  const asset = await app.inject({ url: '/dashboard/assets/x-abc123.js' });
  t.equal(asset.statusCode, 200);
  t.equal(asset.body, 'console.log("dashboard");\n');
  t.match(asset.headers['content-type'], /javascript/);
  t.equal(asset.headers['cache-control'], 'public, max-age=31536000, immutable');
  const redirect = await app.inject({ url: '/dashboard' });
  t.equal(redirect.statusCode, 301);
  t.equal(redirect.headers.location, '/dashboard/');
  const traversal = await app.inject({ url: '/dashboard/..%2F..%2Fetc%2Fpasswd' });
  t.notMatch(traversal.body, /root:/, 'nothing outside the build is served');
});

t.test('behavior: /dashboard/api never falls back to the page', async (t) => {
  const { app } = await buildWebTestApp(t);
  for (const url of ['/dashboard/api/unknown', '/dashboard/api/', '/dashboard/api/v2/jobs']) {
    const res = await app.inject({ url });
    assertError(t, res, 'not_found', 404);
    t.notMatch(res.body, /<html/);
  }
  assertError(t, await app.inject({ method: 'POST', url: '/dashboard/jobs' }), 'not_found', 404);
});

t.test('behavior: page loads are not rate limited', async (t) => {
  const { app } = await buildWebTestApp(t);
  const answers = await Promise.all(Array.from({ length: 80 }, () => app.inject({ url: '/dashboard/assets/x-abc123.js' })));
  t.same([...new Set(answers.map((r) => r.statusCode))], [200]);
});

t.test('error: 503 with how to build when the build is missing', async (t) => {
  const { app, webDir } = await buildWebTestApp(t);
  rmSync(join(webDir, 'index.html'));
  const res = await app.inject({ url: '/dashboard/keys' });
  t.equal(res.statusCode, 503);
  t.match(res.headers['content-type'], /^text\/html/);
  t.match(res.body, /The dashboard is not built: run <code>npm run build -w web<\/code>/);
  t.equal(res.headers['content-security-policy'], CSP);
});

t.test('args: GF_WEB_DIR overrides web/dist; the S3 store adds its origin to connect-src', async (t) => {
  t.equal(loadConfig({}).web.dir, WEB_DIST_DIR);
  t.match(WEB_DIST_DIR, /\/web\/dist\/$/);
  t.equal(loadConfig({ GF_WEB_DIR: '/srv/web' }).web.dir, '/srv/web');
  t.equal(loadConfig({}).web.sessionTtlSeconds, 28_800);
  t.throws(() => loadConfig({ GF_SESSION_TTL_SECONDS: '10' }), /GF_SESSION_TTL_SECONDS/);
  const s3 = (env: Record<string, string>) => loadConfig({ GF_ARTIFACT_STORE: 's3', GF_S3_BUCKET: 'gf-artifacts', ...env }).execution.s3!;
  t.equal(s3PublicOrigin(s3({ GF_S3_ENDPOINT: 'http://127.0.0.1:4569', GF_S3_FORCE_PATH_STYLE: 'true' })), 'http://127.0.0.1:4569');
  t.equal(s3PublicOrigin(s3({ GF_S3_ENDPOINT: 'https://s3.example.com' })), 'https://gf-artifacts.s3.example.com');
  t.equal(s3PublicOrigin(s3({ GF_S3_REGION: 'eu-west-1' })), 'https://gf-artifacts.s3.eu-west-1.amazonaws.com');
  t.match(dashboardCsp(['http://127.0.0.1:4569']), /connect-src 'self' http:\/\/127\.0\.0\.1:4569;/);
});
