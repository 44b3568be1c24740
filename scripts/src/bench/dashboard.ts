import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { z } from 'zod';
import { errorText, isTerminalStatus, type JobStatus } from '@gpufarm/shared';
import { openPostgres } from '@gpufarm/control-plane/db';
import { seedFleet } from '@gpufarm/control-plane/testing';
import { CHROMIUM, CHROMIUM_ARGS } from '../chromium.js';
import { LOCAL_CUSTOMER } from '../chain/local-chain.js';
import { ensureWebBuilt, WEB_DIST } from '../web-build.js';
import { figureCells, figures, followStream, LEAD_SECONDS, Reader, writerScript } from './log-lines.js';
import { startBenchMarketplace, type BenchMarketplace } from './marketplace.js';
import { injectTestWallet, TEST_WALLET_NAME } from '../page-wallet.js';
import { alignedTable, median } from './report.js';
import type { StandaloneSection } from './standalone.js';

/** The issue's targets: first load (JS + CSS, gzip), the job page interactive, a line shown on the page. */
const TARGET_FIRST_LOAD_KB = 250;
const TARGET_INTERACTIVE_MS = 1000;
const TARGET_SHOWN_P99_MS = 500;
const TARGET_NEW_JOB_MS = 1000;
/** Machines seeded onto the market for the New job page's row. */
const MARKET_MACHINES = Number(process.env.BENCH_DASHBOARD_MACHINES ?? 10_000);
/** Lines of the job whose page is loaded, and how many cold loads are measured. */
const PAGE_LINES = 1000;
const LOADS = Number(process.env.BENCH_DASHBOARD_LOADS ?? 7);
/** The live job for the line latency: lines per second and for how many seconds. */
const RATE = Number(process.env.BENCH_DASHBOARD_LOG_RATE ?? 1000);
const SECONDS = Number(process.env.BENCH_DASHBOARD_LOG_SECONDS ?? 10);

const LOG_LINE_SELECTOR = 'pre[aria-label="Log lines"] .log-line';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The JS and CSS index.html loads (scripts, module preloads, stylesheets), each with its gzip size. */
function firstLoad(): { files: number; gzipBytes: number } {
  const html = readFileSync(join(WEB_DIST, 'index.html'), 'utf8');
  const tags = [...html.matchAll(/<(script|link)\b[^>]*>/g)].map((m) => m[0]);
  const assets = tags.flatMap((tag) => {
    const src = /\bsrc="([^"]+)"/.exec(tag)?.[1];
    const href = /\brel="(?:modulepreload|stylesheet)"/.test(tag) ? /\bhref="([^"]+)"/.exec(tag)?.[1] : undefined;
    const url = src ?? href;
    return url?.startsWith('/dashboard/') ? [url.slice('/dashboard/'.length)] : [];
  });
  const gzipBytes = [...new Set(assets)].reduce((sum, asset) => sum + gzipSync(readFileSync(join(WEB_DIST, asset))).length, 0);
  return { files: new Set(assets).size, gzipBytes };
}

/** Polls the job until it ends; throws with the agent's last lines after `timeoutMs`. */
async function waitForEnd(market: BenchMarketplace, jobId: string, timeoutMs: number): Promise<JobStatus> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const job = await market.api<{ status: JobStatus }>('GET', `/v1/jobs/${jobId}`);
    if (job.status === 200 && isTerminalStatus(job.body.status)) return job.body.status;
    if (Date.now() > deadline) throw new Error(`job ${jobId} did not end within ${timeoutMs / 1000} s (${job.body.status})\n${market.agentOutput().join('\n')}`);
    await sleep(500);
  }
}

/** How many lines the job's log holds, every stream (the agent may add lines of its own to the job's). */
async function logLineCount(market: BenchMarketplace, jobId: string): Promise<number> {
  let lines = 0;
  for (let cursor = '0'; ; ) {
    const page = await market.api<{ data: unknown[]; nextCursor: string }>('GET', `/v1/jobs/${jobId}/logs?cursor=${cursor}&limit=1000`);
    if (page.status !== 200) throw new Error(`GET /v1/jobs/${jobId}/logs answered ${page.status}`);
    if (page.body.data.length === 0) return lines;
    lines += page.body.data.length;
    cursor = page.body.nextCursor;
  }
}

/** Which of the lines 0..count-1 a reader never saw: `none`, or how many and the first few. */
function missingLines(reader: Reader, count: number): string {
  const missing = Array.from({ length: count }, (_, n) => n).filter((n) => !reader.latencyMs.has(n));
  if (missing.length === 0) return 'none';
  return `${missing.length} (${missing.slice(0, 12).join(' ')}${missing.length > 12 ? ' …' : ''})`;
}

/** A context with the customer's wallet (dev account 1) in every page. */
async function walletContext(browser: Browser, market: BenchMarketplace, storageState?: Awaited<ReturnType<BrowserContext['storageState']>>): Promise<BrowserContext> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, storageState });
  context.setDefaultTimeout(60_000);
  await injectTestWallet(context, { privateKey: LOCAL_CUSTOMER.privateKey, chainId: market.chain.deployment.chainId, rpcUrl: market.chain.anvil.rpcUrl });
  return context;
}

/** Signs in through the sign-in page as a customer does: the wallet's button, then "Sign in with Ethereum". */
async function signIn(page: Page, baseUrl: string): Promise<void> {
  await page.goto(`${baseUrl}/dashboard/sign-in`);
  await page.getByRole('button', { name: TEST_WALLET_NAME }).click();
  await page.getByText('Connected:').waitFor();
  await page.getByRole('button', { name: 'Sign in with Ethereum' }).click();
  await page.waitForURL(/\/dashboard\/jobs$/);
}

/** What the predicate below uses of the page's globals (this package is typed without the DOM). */
interface PageGlobals {
  document: { querySelectorAll(selector: string): { length: number } };
  performance: { now(): number };
}

/**
 * Milliseconds since the page's navigation started, when the log block holds `count` lines
 * (`atLeast`: or more). A function, not a string: the page's CSP has no 'unsafe-eval'.
 */
async function pageTimeWhenLines(page: Page, count: number, atLeast: boolean): Promise<number> {
  const handle = await page.waitForFunction(
    ({ selector, count, atLeast }) => {
      const { document, performance } = globalThis as unknown as PageGlobals;
      const n = document.querySelectorAll(selector).length;
      return (atLeast ? n >= count : n === count) ? performance.now() : 0;
    },
    { selector: LOG_LINE_SELECTOR, count, atLeast },
    { polling: 'raf' },
  );
  return z.number().parse(await handle.jsonValue());
}

interface LoadFigures {
  shownMs: number;
  interactiveMs: number;
  /** When each step's request started (ms from navigation start; NaN when not seen): where the time goes. */
  steps: Record<keyof typeof STEPS, number>;
}

/** The requests that mark the job page's steps, by a part of their URL. */
const STEPS = { session: '/dashboard/api/auth/session', jobPageChunk: '/dashboard/assets/job-page-', job: '/dashboard/api/v1/jobs/', stream: '/logs/stream' };

/** The start time of the first request of each step (the Resource Timing entries of the page). */
async function stepTimes(page: Page): Promise<LoadFigures['steps']> {
  const entries = await page.evaluate(() => {
    const { performance } = globalThis as unknown as { performance: { getEntriesByType(type: string): Array<{ name: string; startTime: number }> } };
    return performance.getEntriesByType('resource').map((e) => ({ name: e.name, startTime: e.startTime }));
  });
  const first = (part: string) => entries.find((e) => e.name.includes(part))?.startTime ?? NaN;
  return { session: first(STEPS.session), jobPageChunk: first(STEPS.jobPageChunk), job: first(STEPS.job), stream: first(STEPS.stream) };
}

/**
 * One cold load of the job page (a fresh context: empty HTTP cache, the session cookie and the
 * wallet's storage carried over): from navigation start until all the lines are in the log
 * block, and until typing in "Search logs" has filtered them to the one line that matches.
 */
async function loadJobPage(browser: Browser, market: BenchMarketplace, state: Awaited<ReturnType<BrowserContext['storageState']>>, jobId: string, lines: number): Promise<LoadFigures> {
  const context = await walletContext(browser, market, state);
  try {
    const page = await context.newPage();
    try {
      await page.goto(`${market.server.url}/dashboard/jobs/${jobId}`, { waitUntil: 'commit' });
      const shownMs = await pageTimeWhenLines(page, lines, true);
      await page.getByRole('searchbox', { name: 'Search logs' }).fill('page line 777 ');
      const interactiveMs = await pageTimeWhenLines(page, 1, false);
      return { shownMs, interactiveMs, steps: await stepTimes(page) };
    } catch (err) {
      const text = await page.locator('body').innerText({ timeout: 5_000 }).catch(() => '(no text)');
      throw new Error(`the job page at ${page.url()}: ${errorText(err)}\nthe page said: ${text.slice(0, 1500)}`, { cause: err });
    }
  } finally {
    await context.close();
  }
}

interface NewJobFigures {
  /** The GPU class picker lists the market's classes. */
  classesMs: number;
  /** A value typed into Image shows in the spec's JSON: the form answers. */
  interactiveMs: number;
}

/**
 * One cold load of the New job page: from navigation start until the GPU class picker holds the
 * classes on the market, and until an image typed into the form shows in its JSON spec.
 */
async function loadNewJobPage(browser: Browser, market: BenchMarketplace, state: Awaited<ReturnType<BrowserContext['storageState']>>): Promise<NewJobFigures> {
  const context = await walletContext(browser, market, state);
  try {
    const page = await context.newPage();
    try {
      await page.goto(`${market.server.url}/dashboard/jobs/new`, { waitUntil: 'commit' });
      const classesMs = await pageTimeWhen(page, 'classes', null);
      await page.getByLabel('Image', { exact: true }).fill('bench.example/new-job:1');
      const interactiveMs = await pageTimeWhen(page, 'spec', 'bench.example/new-job:1');
      return { classesMs, interactiveMs };
    } catch (err) {
      const text = await page.locator('body').innerText({ timeout: 5_000 }).catch(() => '(no text)');
      throw new Error(`the New job page at ${page.url()}: ${errorText(err)}\nthe page said: ${text.slice(0, 1500)}`, { cause: err });
    }
  } finally {
    await context.close();
  }
}

/** Milliseconds since navigation start when the class picker has more than its "any class" option, or the spec's JSON holds `text`. */
async function pageTimeWhen(page: Page, what: 'classes' | 'spec', text: string | null): Promise<number> {
  interface FormElement {
    textContent: string | null;
    htmlFor?: string;
    querySelectorAll(selector: string): { length: number };
  }
  interface FormGlobals {
    document: { querySelector(selector: string): FormElement | null; querySelectorAll(selector: string): Iterable<FormElement>; getElementById(id: string): FormElement | null };
    performance: { now(): number };
  }
  const handle = await page.waitForFunction(
    ({ what, text }) => {
      const { document, performance } = globalThis as unknown as FormGlobals;
      if (what === 'classes') {
        const label = [...document.querySelectorAll('form[aria-label="New job"] label')].find((l) => l.textContent?.startsWith('GPU class'));
        const select = label?.htmlFor ? document.getElementById(label.htmlFor) : null;
        return select && select.querySelectorAll('option').length > 1 ? performance.now() : 0;
      }
      const spec = document.querySelector('pre[aria-label="Job spec as JSON"]');
      return spec?.textContent?.includes(text ?? '') ? performance.now() : 0;
    },
    { what, text },
    { polling: 'raf' },
  );
  return z.number().parse(await handle.jsonValue());
}

/** Seeds `machines` simulated machines onto the bench marketplace and waits until its offers list them. */
async function seedMarket(market: BenchMarketplace, machines: number, log: (line: string) => void): Promise<number> {
  const db = openPostgres(market.databaseUrl);
  try {
    const seeded = await seedFleet(db, { machines });
    log(`seeded ${seeded.machines} machines (${seeded.gpus} GPUs) on ${seeded.farms} farms`);
  } finally {
    await db.close();
  }
  const deadline = Date.now() + 120_000;
  for (;;) {
    const pricing = await market.api<{ classes: Array<{ gpusOnline: number }> }>('GET', '/v1/pricing');
    const online = pricing.status === 200 ? pricing.body.classes.reduce((n, c) => n + c.gpusOnline, 0) : 0;
    if (online > machines) return online;
    if (Date.now() > deadline) throw new Error(`the market lists ${online} GPUs online 120 s after seeding ${machines} machines`);
    await sleep(500);
  }
}

// In the page before its scripts: each log line added to the DOM is reported with the time it
// was added (ms since the epoch), one binding call per batch of mutations.
const STAMP_LINES = `new MutationObserver((records) => {
  const at = performance.timeOrigin + performance.now();
  const texts = [];
  for (const record of records) for (const node of record.addedNodes) {
    if (node.nodeType !== 1) continue;
    if (node.matches('.log-line')) texts.push(node.textContent);
    else for (const line of node.querySelectorAll('.log-line')) texts.push(line.textContent);
  }
  if (texts.length > 0) window.__gfLinesShown(at, texts);
}).observe(document, { childList: true, subtree: true });`;

/**
 * The dashboard, on a marketplace of its own (`startBenchMarketplace`: control plane, anvil,
 * the real agent) and Debian's Chromium through playwright-core, signed in through the page
 * with a bench wallet (EIP-6963) holding dev account 1's key:
 * (a) the first load: gzip bytes of the JS and CSS web/dist/index.html loads, target ≤ 250 KB;
 * (b) the job page of a finished job with 1,000 lines, `BENCH_DASHBOARD_LOADS` (7) cold loads:
 *     from navigation start until the lines are shown and until the search box has filtered
 *     them; target: the median ≤ 1 s;
 * (c) a live job writing `BENCH_DASHBOARD_LOG_RATE` (1000) timestamped lines a second for
 *     `BENCH_DASHBOARD_LOG_SECONDS` (10), the job page open: a line's latency is when a
 *     MutationObserver saw it added to the page minus the container's write time (same
 *     machine clock); target p99 ≤ 500 ms. Baseline on the same lines at the same time: a Node
 *     client of the live stream (SSE), what the page itself follows;
 * (d) the New job page, `BENCH_DASHBOARD_LOADS` cold loads on the one-machine market (the
 *     baseline), then again with `BENCH_DASHBOARD_MACHINES` (10,000) seeded machines offered:
 *     from navigation start until the GPU class picker lists the market's classes, and until an
 *     image typed into the form shows in its JSON spec; target: the median ≤ 1 s.
 */
export const dashboardSection: StandaloneSection = {
  name: 'dashboard',
  run: async (log) => {
    await ensureWebBuilt(log);
    const load = firstLoad();
    const firstLoadKb = load.gzipBytes / 1024;
    log(`first load: ${load.files} files, ${firstLoadKb.toFixed(1)} KB gzip`);

    const market = await startBenchMarketplace(log, 'dashboard');
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
    try {
      const pageScript = `i=0; while [ $i -lt ${PAGE_LINES} ]; do echo "page line $i of the job page bench: enough words to look like a log line"; i=$((i+1)); done`;
      const pageJob = await market.createJob('bench dashboard job page', pageScript);
      await market.fund(pageJob);
      const pageJobStatus = await waitForEnd(market, pageJob, 120_000);
      const pageJobLines = await logLineCount(market, pageJob);
      log(`job ${pageJob} wrote ${PAGE_LINES} lines and ended ${pageJobStatus}; its log holds ${pageJobLines} lines`);

      const signInContext = await walletContext(browser, market);
      await signIn(await signInContext.newPage(), market.server.url);
      const state = await signInContext.storageState();
      await signInContext.close();
      log(`signed in through the page as ${LOCAL_CUSTOMER.address}`);

      // One load first so the server's own first-request work is not counted.
      await loadJobPage(browser, market, state, pageJob, pageJobLines);
      const loads: LoadFigures[] = [];
      for (let i = 0; i < LOADS; i++) loads.push(await loadJobPage(browser, market, state, pageJob, pageJobLines));
      const shown = median(loads.map((l) => l.shownMs));
      const interactive = median(loads.map((l) => l.interactiveMs));
      log(`job page loads (lines shown / search answered, ms): ${loads.map((l) => `${l.shownMs.toFixed(0)}/${l.interactiveMs.toFixed(0)}`).join(', ')}`);
      const stepMedian = (step: keyof typeof STEPS) => median(loads.map((l) => l.steps[step])).toFixed(0);
      log(`job page requests start, median ms from navigation: session ${stepMedian('session')}, job page chunk ${stepMedian('jobPageChunk')}, job ${stepMedian('job')}, log stream ${stepMedian('stream')}`);

      // (c) the page open on a job before it runs; the lines arrive while it is watched.
      const count = RATE * SECONDS;
      const liveJob = await market.createJob('bench dashboard live log', writerScript(RATE, count));
      const onPage = new Reader();
      const viaStream = new Reader();
      const context = await walletContext(browser, market, state);
      await context.exposeBinding('__gfLinesShown', (_source, at: unknown, texts: unknown) => {
        const stamp = z.number().parse(at);
        for (const text of z.array(z.string()).parse(texts)) onPage.take(text.trim(), stamp);
      });
      await context.addInitScript(STAMP_LINES);
      const page = await context.newPage();
      await page.goto(`${market.server.url}/dashboard/jobs/${liveJob}`);
      await page.getByRole('heading', { name: 'Logs' }).waitFor();
      const streamed = followStream(`${market.server.url}/v1/jobs/${liveJob}/logs/stream?cursor=0`, market.apiKey, viaStream);
      streamed.catch(() => undefined);
      await market.fund(liveJob);
      log(`job ${liveJob} funded: ${count} lines at ${RATE}/s after ${LEAD_SECONDS} s, its page open`);
      const liveStatus = await waitForEnd(market, liveJob, (LEAD_SECONDS + SECONDS) * 1000 + 120_000);
      await streamed;
      // The page's stream ends with the job; give its last batch a moment to reach the DOM.
      for (let i = 0; i < 40 && onPage.latencyMs.size < count; i++) await sleep(250);
      const onPageAtEnd = new Reader();
      for (const text of await page.locator(LOG_LINE_SELECTOR).allTextContents()) onPageAtEnd.take(text.trim(), 0);
      const pageLines = onPageAtEnd.latencyMs.size;
      log(`live lines missing from the page at the end: ${missingLines(onPageAtEnd, count)}; not seen added by the observer: ${missingLines(onPage, count)}`);
      await context.close();

      // (d) the New job page, the baseline on the one-machine market, then with MARKET_MACHINES offered.
      const newJobLoads = async (label: string) => {
        await loadNewJobPage(browser, market, state);
        const runs: NewJobFigures[] = [];
        for (let i = 0; i < LOADS; i++) runs.push(await loadNewJobPage(browser, market, state));
        log(`New job page, ${label} (classes listed / form answered, ms): ${runs.map((r) => `${r.classesMs.toFixed(0)}/${r.interactiveMs.toFixed(0)}`).join(', ')}`);
        return { classes: median(runs.map((r) => r.classesMs)), interactive: median(runs.map((r) => r.interactiveMs)) };
      };
      const newJobBaseline = await newJobLoads('1 machine');
      const gpusOnline = await seedMarket(market, MARKET_MACHINES, log);
      const newJob = await newJobLoads(`${MARKET_MACHINES} machines more (${gpusOnline} GPUs online)`);

      const p = figures(onPage);
      const st = figures(viaStream);
      const firstLoadPass = firstLoadKb <= TARGET_FIRST_LOAD_KB;
      const interactivePass = interactive <= TARGET_INTERACTIVE_MS;
      const shownPass = p.lines === count && p.p99 <= TARGET_SHOWN_P99_MS && onPage.duplicates === 0;
      const newJobPass = newJob.interactive <= TARGET_NEW_JOB_MS;
      const verdict = (pass: boolean) => (pass ? 'PASS' : 'FAIL');
      const ms = (x: number) => x.toFixed(0);
      const dash = ['-', '-', '-', '-', '-'];
      const table = alignedTable([
        ['dashboard (Chromium; ms unless stated)', 'lines', 'lines/s', 'p50', 'p95', 'p99', 'max', 'target', 'result'],
        [`first load: JS + CSS of index.html, gzip (${load.files} files), KB`, '-', '-', firstLoadKb.toFixed(1), '-', '-', '-', `<= ${TARGET_FIRST_LOAD_KB} KB`, verdict(firstLoadPass)],
        [`job page, ${PAGE_LINES} lines: navigation to lines shown (median of ${LOADS} cold loads)`, String(PAGE_LINES), '-', ms(shown), ...dash.slice(0, 3), '', ''],
        [`job page, ${PAGE_LINES} lines: navigation to search answered (median of ${LOADS} cold loads)`, String(PAGE_LINES), '-', ms(interactive), ...dash.slice(0, 3), `<= ${TARGET_INTERACTIVE_MS} ms`, verdict(interactivePass)],
        ['live line: container write to added to the job page (MutationObserver)', ...figureCells(p, count), `p99 <= ${TARGET_SHOWN_P99_MS} ms`, verdict(shownPass)],
        ['baseline: the same lines through the live stream (SSE) to a Node client', ...figureCells(st, count), 'baseline', ''],
        [`New job page, ${MARKET_MACHINES} machines on the market: navigation to classes listed (median of ${LOADS} cold loads)`, '-', '-', ms(newJob.classes), ...dash.slice(0, 3), '', ''],
        [`New job page, ${MARKET_MACHINES} machines on the market: navigation to the form answering typing (median of ${LOADS})`, '-', '-', ms(newJob.interactive), ...dash.slice(0, 3), `<= ${TARGET_NEW_JOB_MS} ms`, verdict(newJobPass)],
        [`baseline: the New job page on the 1-machine market (classes listed / form answering, median of ${LOADS})`, '-', '-', `${ms(newJobBaseline.classes)}/${ms(newJobBaseline.interactive)}`, ...dash.slice(0, 3), 'baseline', ''],
      ]);
      table.push(
        `job page loads, ms (lines shown / search answered): ${loads.map((l) => `${ms(l.shownMs)}/${ms(l.interactiveMs)}`).join(', ')}; the page adds ${ms(p.p50 - st.p50)} ms at p50 and ${ms(p.p99 - st.p99)} ms at p99 to the stream; ${pageLines} lines on the page at the end, ${onPage.duplicates} added twice; live job ${liveStatus}; load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}`,
      );
      const missed: string[] = [];
      if (!firstLoadPass) missed.push(`dashboard: first load ${firstLoadKb.toFixed(1)} KB gzip (target <= ${TARGET_FIRST_LOAD_KB} KB)`);
      if (!interactivePass) missed.push(`dashboard: job page interactive after ${ms(interactive)} ms at the median (target <= ${TARGET_INTERACTIVE_MS} ms)`);
      if (!newJobPass) missed.push(`dashboard: New job page answering after ${ms(newJob.interactive)} ms at the median with ${MARKET_MACHINES} machines (target <= ${TARGET_NEW_JOB_MS} ms)`);
      if (!shownPass) missed.push(`dashboard: ${p.lines}/${count} live lines on the page, p99 ${ms(p.p99)} ms (target <= ${TARGET_SHOWN_P99_MS} ms)`);
      return { table, missed };
    } finally {
      await browser.close();
      await market.close(log);
    }
  },
};
