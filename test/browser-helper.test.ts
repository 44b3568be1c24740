import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import t from 'tap';
import { openBrowserPage } from './helpers/browser.js';

// Pages made to trip each recorder, so a page test that asserts "none" can fail.
const PAGES: Record<string, { headers?: Record<string, string>; body: string; type?: string }> = {
  '/strict': {
    headers: { 'Content-Security-Policy': "default-src 'none'; script-src 'self'" },
    body: '<!doctype html><html lang="en"><head><title>strict</title></head><body><main><p>strict</p><script>document.title = "inline ran";</script></main></body></html>',
  },
  // 127.0.0.2 is loopback too, but another origin; nothing listens on port 9 (discard).
  '/sloppy': { body: '<!doctype html><html><head><title>sloppy</title></head><body><img src="http://127.0.0.2:9/pixel.png"><script src="/throws.js"></script></body></html>' },
  '/throws.js': { type: 'text/javascript', body: 'console.error("logged by the page"); throw new Error("thrown by the page");' },
};

async function serve(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const server: Server = createServer((request, response) => {
    const page = PAGES[request.url ?? ''];
    if (!page) return void response.writeHead(404).end();
    response.writeHead(200, { 'Content-Type': page.type ?? 'text/html; charset=utf-8', ...page.headers }).end(page.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => server.close(resolve)));
  const address = server.address();
  if (typeof address !== 'object' || !address) throw new Error('no address');
  return `http://127.0.0.1:${address.port}`;
}

t.test('behavior: a blocked inline script is recorded as a CSP violation and a console error', async (t) => {
  const base = await serve(t);
  const browser = await openBrowserPage(t);
  await browser.page.goto(`${base}/strict`);
  t.equal(await browser.page.title(), 'strict', 'the inline script did not run');
  t.match(browser.cspViolations, [{ directive: 'script-src-elem', blockedURI: 'inline' }]);
  t.match(browser.consoleErrors, [/Content Security Policy/]);
  t.same(browser.failedRequests, []);
});

t.test('behavior: requests to another origin, failed requests, page errors and axe findings are recorded', async (t) => {
  const base = await serve(t);
  const browser = await openBrowserPage(t);
  await browser.page.goto(`${base}/sloppy`, { waitUntil: 'load' });
  t.ok(browser.requests.some((r) => r.url === 'http://127.0.0.2:9/pixel.png'), 'the request to the other origin is listed');
  t.match(browser.failedRequests, [{ url: 'http://127.0.0.2:9/pixel.png', error: /ERR_/ }]);
  t.ok(browser.consoleErrors.some((e) => e.startsWith('logged by the page')), 'console.error is recorded');
  t.ok(browser.consoleErrors.includes('uncaught: thrown by the page'), 'an uncaught error is recorded');
  t.same(browser.cspViolations, [], 'no policy, no violation');
  const ids = (await browser.axe()).map((v) => v.id);
  for (const id of ['image-alt', 'html-has-lang']) t.ok(ids.includes(id), `axe finds ${id}`);
  const path = await browser.screenshot('sloppy');
  t.match(path, /test-output\/screenshots\/browser-helper\/behavior-requests-to-another-origin[^/]*\/sloppy\.png$/);
  t.ok(existsSync(path), 'the screenshot is kept');
});
