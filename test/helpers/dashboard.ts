import type { Test } from 'tap';
import type { Hex } from 'viem';
import { openBrowserPage, type BrowserPage } from './browser.js';
import { CHAIN_ID, type Marketplace } from './marketplace.js';
import { injectTestWallet, TEST_WALLET_NAME, type TestWallet } from '@gpufarm/scripts/page-wallet';

/** A Chromium page with the test wallet holding `privateKey`, signed in to the dashboard. */
export interface DashboardSession extends BrowserPage {
  wallet: TestWallet;
  /** The `POST /dashboard/api/auth/sign-in` body the page sent (the SIWE message and signature). */
  signInBody: string;
  /** Calls `/dashboard/api/…` with this page's session cookie (and its CSRF token when `csrf`). */
  api(method: 'GET' | 'POST', path: string, options?: { body?: unknown; csrf?: boolean }): Promise<{ status: number; body: unknown }>;
  /** The session's CSRF token, as the dashboard reads it. */
  csrfToken(): Promise<string>;
}

/** Opens the dashboard's sign-in page in a fresh browser context with the test wallet and signs in the way a person does. */
export async function signInToDashboard(t: Test, market: Marketplace, privateKey: Hex): Promise<DashboardSession> {
  const browser = await openBrowserPage(t);
  const { page } = browser;
  const wallet = await injectTestWallet(page.context(), { privateKey, rpcUrl: market.anvil.rpcUrl, chainId: CHAIN_ID });
  let signInBody = '';
  page.on('request', (request) => {
    if (request.method() === 'POST' && request.url().endsWith('/dashboard/api/auth/sign-in')) signInBody = request.postData() ?? '';
  });
  await page.goto(`${market.url}/dashboard/sign-in`);
  await page.getByRole('button', { name: TEST_WALLET_NAME }).click();
  await page.getByRole('button', { name: 'Sign in with Ethereum' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();

  const cookieHeader = async (): Promise<string> =>
    (await page.context().cookies(market.url)).map((c) => `${c.name}=${c.value}`).join('; ');
  const csrfToken = async (): Promise<string> => {
    const res = await fetch(`${market.url}/dashboard/api/auth/session`, { headers: { cookie: await cookieHeader() } });
    const body = (await res.json()) as { csrfToken?: string };
    if (res.status !== 200 || !body.csrfToken) throw new Error(`GET /dashboard/api/auth/session answered ${res.status}`);
    return body.csrfToken;
  };
  return {
    ...browser,
    wallet,
    signInBody,
    csrfToken,
    async api(method, path, options = {}) {
      const headers: Record<string, string> = { cookie: await cookieHeader() };
      if (options.body !== undefined) headers['content-type'] = 'application/json';
      if (options.csrf) headers['x-csrf-token'] = await csrfToken();
      const res = await fetch(`${market.url}/dashboard/api${path}`, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) });
      const text = await res.text();
      return { status: res.status, body: text ? (JSON.parse(text) as unknown) : null };
    },
  };
}

/** Screenshots the page as it is and checks it with axe-core: no serious or critical violation. */
export async function lookAt(t: Test, session: BrowserPage, name: string): Promise<void> {
  await session.screenshot(name);
  const violations = (await session.axe()).filter((v) => v.impact === 'serious' || v.impact === 'critical');
  t.same(
    violations.map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.html).join(' | ').slice(0, 300)})`),
    [],
    `${name}: no serious or critical axe-core violation`,
  );
}
