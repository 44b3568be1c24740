import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import type { Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { createSiweMessage, parseSiweMessage } from 'viem/siwe';
import { ANVIL_ACCOUNTS } from '../../src/testing/anvil.js';
import { createPostgresTestDatabase } from './database.js';
import { buildTestApp, type TestApp } from './app.js';

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** The public URL the dashboard tests serve at, and the Host their requests carry. */
export const PUBLIC_URL = 'http://dash.test:8080';
export const HOST = 'dash.test:8080';
export const CHAIN_ID = 4663;

/** A built web app of two files (`index.html`, one hashed script) in a temporary folder. */
export function fakeWebDist(t: Teardown): string {
  const dir = mkdtempSync(join(tmpdir(), 'gf-test-web-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, 'assets'));
  writeFileSync(join(dir, 'index.html'), '<!doctype html><html><head><script type="module" src="/dashboard/assets/x-abc123.js"></script></head><body><div id="root"></div></body></html>\n');
  writeFileSync(join(dir, 'assets', 'x-abc123.js'), 'console.log("dashboard");\n');
  return dir;
}

/** The real app on a PostgreSQL database of its own (cloned from the migrated template) serving a fake web build at PUBLIC_URL (`env` adds or overrides). */
export async function buildWebTestApp(t: Teardown, env: Record<string, string> = {}): Promise<TestApp & { webDir: string }> {
  const webDir = fakeWebDist(t);
  const { db } = await createPostgresTestDatabase(t);
  const test = await buildTestApp(t, { db, env: { GF_PUBLIC_URL: PUBLIC_URL, GF_WEB_DIR: webDir, ...env } });
  return { ...test, webDir };
}

/** A signer of SIWE messages: an anvil dev key, or a contract wallet whose owner's key signs. */
export interface SiweSigner {
  address: `0x${string}`;
  signMessage(message: string): Promise<Hex>;
}

/** Dev account `index` as a wallet that signs with its key. */
export function devWallet(index: 1 | 2 | 3): SiweSigner {
  const account = privateKeyToAccount(ANVIL_ACCOUNTS[index].privateKey);
  return { address: account.address, signMessage: (message) => account.signMessage({ message }) };
}

/**
 * The browser cookie each issued nonce is bound to, as `name=value`: the test browser that asked
 * for the nonce, whose cookie `postSignIn` sends with a message of that nonce.
 */
const browserOfNonce = new Map<string, string>();

/** The `gf_browser` (or `__Host-gf_browser`) cookie a nonce answer set, as `name=value`. */
export function browserCookieOf(res: LightMyRequestResponse): string {
  const cookie = res.cookies.find((c) => c.name.endsWith('gf_browser'));
  if (!cookie) throw new Error('the nonce answer set no browser cookie');
  return `${cookie.name}=${cookie.value}`;
}

/** A fresh server nonce for a new test browser (or the one of `browserCookie`). */
export async function issueNonce(app: FastifyInstance, host = HOST, browserCookie?: string): Promise<string> {
  const res = await app.inject({ method: 'POST', url: '/dashboard/api/auth/nonce', headers: { host, ...(browserCookie ? { cookie: browserCookie } : {}) } });
  if (res.statusCode !== 201) throw new Error(`nonce answered ${res.statusCode}: ${res.body}`);
  const nonce = res.json().nonce as string;
  const browser = res.cookies.find((c) => c.name.endsWith('gf_browser'));
  if (browser) browserOfNonce.set(nonce, `${browser.name}=${browser.value}`);
  return nonce;
}

/** The EIP-4361 message a dashboard at PUBLIC_URL asks a wallet to sign; `overrides` spoil one field. */
export function siweMessage(address: `0x${string}`, nonce: string, overrides: Partial<Parameters<typeof createSiweMessage>[0]> = {}): string {
  return createSiweMessage({
    domain: HOST,
    address,
    statement: 'Sign in to the gpufarm dashboard.',
    uri: `${PUBLIC_URL}/dashboard/`,
    version: '1',
    chainId: CHAIN_ID,
    nonce,
    issuedAt: new Date(),
    ...overrides,
  });
}

export interface SignedIn {
  cookie: string;
  csrfToken: string;
  address: string;
  res: LightMyRequestResponse;
}

/**
 * Posts a signed message to sign-in as is, from the test browser that asked for its nonce (its
 * browser cookie added to `headers.cookie`) unless `options.otherBrowser`.
 */
export function postSignIn(
  app: FastifyInstance,
  body: { message: string; signature: string },
  headers: Record<string, string> = {},
  options: { otherBrowser?: boolean } = {},
): Promise<LightMyRequestResponse> {
  let nonce: string | undefined;
  try {
    nonce = parseSiweMessage(body.message).nonce;
  } catch {
    nonce = undefined;
  }
  const browser = nonce === undefined || options.otherBrowser ? undefined : browserOfNonce.get(nonce);
  const cookie = [headers.cookie, browser].filter((c) => c !== undefined).join('; ');
  return app.inject({ method: 'POST', url: '/dashboard/api/auth/sign-in', headers: { host: HOST, ...headers, ...(cookie ? { cookie } : {}) }, payload: body });
}

/** Signs in with `signer` (a nonce, its message, its signature) and returns the session cookie and CSRF token. */
export async function signIn(app: FastifyInstance, signer: SiweSigner = devWallet(1), headers: Record<string, string> = {}): Promise<SignedIn> {
  const message = siweMessage(signer.address, await issueNonce(app));
  const res = await postSignIn(app, { message, signature: await signer.signMessage(message) }, headers);
  if (res.statusCode !== 200) throw new Error(`sign-in answered ${res.statusCode}: ${res.body}`);
  const cookie = res.cookies.find((c) => c.name.endsWith('gf_session'));
  if (!cookie) throw new Error('sign-in set no gf_session cookie');
  return { cookie: cookie.value, csrfToken: res.json().csrfToken as string, address: res.json().address as string, res };
}

/** Headers of a dashboard request with the session (and its CSRF token for writes). */
export function session(signedIn: SignedIn, options: { csrf?: boolean } = {}): Record<string, string> {
  return { host: HOST, cookie: `gf_session=${signedIn.cookie}`, ...(options.csrf ? { 'x-csrf-token': signedIn.csrfToken } : {}) };
}
