import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import tap from 'tap';
import { z } from 'zod';
import { CHROMIUM, CHROMIUM_ARGS } from '@gpufarm/scripts/chromium';

export { CHROMIUM, CHROMIUM_ARGS };

/** Where screenshots are kept (gitignored; `.ci/run` lists them): `<file>/<test>/<name>.png`. */
export const SCREENSHOT_DIR = join(new URL('../../', import.meta.url).pathname, 'test-output/screenshots');

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

const axeViolationSchema = z.object({
  id: z.string(),
  impact: z.enum(['minor', 'moderate', 'serious', 'critical']).nullable(),
  help: z.string(),
  nodes: z.array(z.object({ target: z.array(z.unknown()), html: z.string() })),
});
const axeResultsSchema = z.object({ violations: z.array(axeViolationSchema) });
export type AxeViolation = z.infer<typeof axeViolationSchema>;

const cspViolationSchema = z.object({ directive: z.string(), blockedURI: z.string(), sourceFile: z.string(), lineNumber: z.number() });
export type CspViolation = z.infer<typeof cspViolationSchema>;

// Runs before any page script. Chromium also logs a violation to the console, but the event
// carries the directive and the blocked URL as data.
const CSP_LISTENER = `document.addEventListener('securitypolicyviolation', (e) => {
  window.__gfCspViolation({ directive: e.effectiveDirective, blockedURI: e.blockedURI, sourceFile: e.sourceFile, lineNumber: e.lineNumber });
});`;

export interface BrowserPage {
  page: Page;
  /** Console errors and uncaught page errors, in order. */
  consoleErrors: string[];
  /** `securitypolicyviolation` events the page raised. */
  cspViolations: CspViolation[];
  /** Every request the page made: method, URL. */
  requests: { method: string; url: string }[];
  /** Requests that got no answer (refused, blocked, aborted), with Chromium's reason. */
  failedRequests: { url: string; error: string }[];
  /** Saves a screenshot (the whole page unless `fullPage: false`) as `name`.png in this test's folder; answers its path. */
  screenshot(name: string, options?: { fullPage?: boolean }): Promise<string>;
  /** Runs axe-core on the page as it is now; answers its violations (all impacts). */
  axe(): Promise<AxeViolation[]>;
}

const slug = (text: string) => text.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '').slice(0, 80);

interface TestContext {
  fullname: string;
  name: string;
  teardown(fn: () => unknown): void;
}

let shared: Promise<Browser> | null = null;

/**
 * The test file's one headless Chromium, started on first use and closed when the file's tests
 * are done. A start costs about 1.5 CPU-seconds more than a context, and the page files sign in
 * a dozen times each.
 */
function sharedBrowser(): Promise<Browser> {
  if (!shared) {
    const launched = chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
    shared = launched;
    // A browser that crashed is replaced for the next page rather than failing every later test.
    launched.then((browser) => browser.on('disconnected', () => { if (shared === launched) shared = null; }), () => { if (shared === launched) shared = null; });
    tap.teardown(() => launched.then((browser) => browser.close(), () => undefined));
  }
  return shared;
}

/**
 * A page in a browser context of its own (cookies, storage, cache and permissions: what a fresh
 * browser would have) that records its console errors, CSP violations and requests. The context
 * is closed when the test ends; the browser is the file's one (`sharedBrowser`).
 */
export async function openBrowserPage(t: TestContext): Promise<BrowserPage> {
  const browser = await sharedBrowser();
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  t.teardown(() => context.close());
  // The suite runs test files side by side on few cores; Playwright's 30 s default is tight there.
  context.setDefaultTimeout(60_000);
  const page = await context.newPage();
  const recorded: Omit<BrowserPage, 'page' | 'screenshot' | 'axe'> = { consoleErrors: [], cspViolations: [], requests: [], failedRequests: [] };

  await page.exposeBinding('__gfCspViolation', (_source, violation: unknown) => {
    recorded.cspViolations.push(cspViolationSchema.parse(violation));
  });
  await page.addInitScript(CSP_LISTENER);
  page.on('console', (message) => {
    if (message.type() === 'error') recorded.consoleErrors.push(`${message.text()} (${message.location().url})`);
  });
  page.on('pageerror', (error) => recorded.consoleErrors.push(`uncaught: ${error.message}`));
  page.on('request', (request) => recorded.requests.push({ method: request.method(), url: request.url() }));
  page.on('requestfailed', (request) => recorded.failedRequests.push({ url: request.url(), error: request.failure()?.errorText ?? 'failed' }));

  const file = basename(t.fullname.split(' > ')[0] ?? 'test').replace(/\.test\.ts$/, '');
  const folder = join(SCREENSHOT_DIR, slug(file), slug(t.name));
  return {
    page,
    ...recorded,
    async screenshot(name, options = {}) {
      mkdirSync(folder, { recursive: true });
      const path = join(folder, `${slug(name)}.png`);
      await page.screenshot({ path, fullPage: options.fullPage ?? true });
      return path;
    },
    async axe() {
      // Evaluated through the DevTools protocol, which the page's script-src does not govern.
      await page.evaluate(AXE_SOURCE);
      const results: unknown = await page.evaluate(`axe.run(document, { resultTypes: ['violations'] })`);
      return axeResultsSchema.parse(results).violations;
    },
  };
}
