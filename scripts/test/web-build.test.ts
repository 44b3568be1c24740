import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import t, { type Test } from 'tap';
import { webFingerprint } from '../src/web-build.js';

/** A repository tree of the dashboard build's inputs and of what the fingerprint must skip. */
function tree(t: Test): { root: string; write: (path: string, text: string) => void } {
  const root = mkdtempSync(join(tmpdir(), 'gf-web-build-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const write = (path: string, text: string) => {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  };
  write('web/index.html', '<!doctype html>');
  write('web/vite.config.ts', 'export default {};');
  write('web/src/main.tsx', 'export {};');
  write('client/src/browser.ts', 'export {};');
  write('shared/src/index.ts', 'export {};');
  write('package-lock.json', '{}');
  return { root, write };
}

t.test('default: the same inputs give the same fingerprint', async (t) => {
  const { root } = tree(t);
  t.match(webFingerprint(root), /^[0-9a-f]{64}$/);
  t.equal(webFingerprint(root), webFingerprint(root));
});

t.test('behavior: a change to a source, the config, the SDK, shared or the lockfile changes it', async (t) => {
  for (const path of ['web/src/main.tsx', 'web/vite.config.ts', 'web/src/new-page.tsx', 'client/src/browser.ts', 'shared/src/index.ts', 'package-lock.json']) {
    const { root, write } = tree(t);
    const before = webFingerprint(root);
    write(path, 'changed');
    t.not(webFingerprint(root), before, path);
  }
});

t.test('behavior: the build output, installs and tsc output do not count', async (t) => {
  const { root, write } = tree(t);
  const before = webFingerprint(root);
  write('web/dist/index.html', 'built');
  write('web/dist/.build-stamp.json', '{}');
  write('web/node_modules/x/index.js', 'installed');
  write('web/.tsbuild/main.js', 'compiled');
  write('web/tsconfig.tsbuildinfo', '{}');
  write('client/dist/browser.js', 'bundled');
  t.equal(webFingerprint(root), before);
});
