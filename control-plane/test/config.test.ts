import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import t from 'tap';
import { ConfigError, loadConfig } from '../src/config.js';

const run = promisify(execFile);

t.test('defaults', async (t) => {
  const config = loadConfig({});
  t.equal(config.port, 8080);
  t.equal(config.environment, 'local');
  t.equal(config.chainId, 4663);
  t.equal(config.databaseUrl, undefined, 'PGlite unless DATABASE_URL is set');
  t.equal(config.dataDir, '.gpufarm');
  t.equal(config.publicUrl, 'http://127.0.0.1:8080');
  t.equal(config.stableToken, null);
  t.same(loadConfig({ GF_BANNED_IMAGES: ' acme/tool , evil/* ' }).bannedImages, ['acme/tool', 'evil/*']);
});

t.test('error: a bad value names the variable', async (t) => {
  const cases: [string, string][] = [
    ['PORT', 'eighty'],
    ['GF_ENVIRONMENT', 'staging'],
    ['DATABASE_URL', 'mysql://x'],
    ['GF_PLATFORM_FEE_BPS', '12.5'],
    ['GF_TRUST_PROXY', 'maybe'],
    ['GF_ADMIN_TOKEN', 'short'],
    ['GF_STABLE_TOKEN_ADDRESS', '0x123'],
    ['GF_BANNED_IMAGES', 'acme/tool, *'],
    ['GF_WEI_PER_USD', '1.5'],
  ];
  for (const [name, value] of cases) {
    const err = (() => {
      try {
        loadConfig({ [name]: value });
        return null;
      } catch (e) {
        return e;
      }
    })();
    t.ok(err instanceof ConfigError, `${name}: a ConfigError`);
    t.match((err as Error).message, name, `${name}: the message names it`);
    t.equal((err as ConfigError).problems.length, 1, `${name}: one problem`);
  }
});

t.test('error: the process stops with a message naming the variable', async (t) => {
  const main = new URL('../src/main.ts', import.meta.url).pathname;
  const err = await run(process.execPath, ['--import', 'tsx', main], { env: { ...process.env, PORT: 'eighty', GF_ENVIRONMENT: 'staging' } }).catch((e: unknown) => e);
  const failure = err as { code: number; stderr: string };
  t.equal(failure.code, 1);
  t.match(failure.stderr, /PORT/);
  t.match(failure.stderr, /GF_ENVIRONMENT/);
  t.notMatch(failure.stderr, /at .*\.ts:\d+/, 'a message, not a stack trace');
});
