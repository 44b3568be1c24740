/** Debian's Chromium, which `scripts/test-env.sh` installs; playwright-core downloads no browser. */
export const CHROMIUM = '/usr/bin/chromium';

/**
 * What works on a headless container machine: no sandbox (root, no user namespaces), no GPU, and
 * nothing Chromium would fetch on its own (QUIC probes, component updates, sync), so the only
 * requests are the page's. Playwright adds `--headless` and a fresh temporary `--user-data-dir`.
 * The page tests and the dashboard bench launch it with these.
 */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
