import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { errorText } from '@gpufarm/shared';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** The built web app the control plane serves at /dashboard/ (its default GF_WEB_DIR). */
export const WEB_DIST = join(ROOT, 'web/dist');
/** Written into web/dist after a build: the fingerprint of the inputs it was built from. */
export const WEB_STAMP = join(WEB_DIST, '.build-stamp.json');

/**
 * What the build reads: web/ (sources, index.html, Vite and TypeScript config, package.json),
 * the SDK and shared sources Vite bundles from TypeScript, and the lockfile that pins the
 * libraries. Folders of web/ that are outputs or installs are skipped.
 */
const INPUTS = ['web', 'client/src', 'shared/src', 'package-lock.json'];
const SKIPPED = new Set(['node_modules', 'dist', '.tsbuild']);

const stampSchema = z.object({ fingerprint: z.string().regex(/^[0-9a-f]{64}$/), builtAt: z.string() });

function listFiles(path: string, into: string[]): void {
  let entries;
  try {
    entries = readdirSync(path, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOTDIR') into.push(path);
    else if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    return;
  }
  for (const entry of entries) {
    if (SKIPPED.has(entry.name) || entry.name.endsWith('.tsbuildinfo')) continue;
    const child = join(path, entry.name);
    if (entry.isDirectory()) listFiles(child, into);
    else if (entry.isFile()) into.push(child);
  }
}

/** SHA-256 over every input file's path (relative to `root`, the repository) and bytes, in a stable order. */
export function webFingerprint(root = ROOT): string {
  const files: string[] = [];
  for (const input of INPUTS) listFiles(join(root, input), files);
  const hash = createHash('sha256');
  for (const file of files.map((f) => relative(root, f)).sort()) {
    hash.update(`${file}\0`);
    hash.update(readFileSync(join(root, file)));
    hash.update('\0');
  }
  return hash.digest('hex');
}

/** The fingerprint web/dist was built from; null when it has no (readable) stamp or no index.html. */
function builtFingerprint(): string | null {
  try {
    readFileSync(join(WEB_DIST, 'index.html'));
    return stampSchema.parse(JSON.parse(readFileSync(WEB_STAMP, 'utf8'))).fingerprint;
  } catch {
    return null;
  }
}

/** A failed build: `output` is what Vite printed. */
export class WebBuildError extends Error {
  constructor(
    message: string,
    readonly output: string,
  ) {
    super(message);
    this.name = 'WebBuildError';
  }
}

/** `npm run build -w web` as a child; resolves with its output, rejects with a WebBuildError. */
function viteBuild(): Promise<string> {
  return new Promise((resolve, reject) => {
    // tsx's and tap's loaders have no business in Vite's process.
    const env = { ...process.env, NODE_OPTIONS: undefined };
    const child = spawn('npm', ['run', 'build', '-w', 'web'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', (err) => reject(new WebBuildError(`could not run npm run build -w web: ${err.message}`, output)));
    child.on('close', (code, signal) => {
      if (code === 0) resolve(output);
      else reject(new WebBuildError(`npm run build -w web ${signal ? `was killed by ${signal}` : `exited ${code}`}`, output));
    });
  });
}

export interface WebBuild {
  /** True when this call built the app; false when web/dist was current. */
  built: boolean;
  fingerprint: string;
  dir: string;
}

/**
 * Makes web/dist current: builds the dashboard with Vite when web/dist is missing or was built
 * from other inputs (web/, client/src, shared/src, the lockfile), then stamps it; otherwise does
 * nothing. `log` gets one line saying which. Throws a WebBuildError carrying Vite's output when
 * the build fails (web/dist then holds what the failure left: the previous build, or nothing).
 *
 * @example await ensureWebBuilt((line) => console.log(`[start] ${line}`));
 */
export async function ensureWebBuilt(log: (line: string) => void): Promise<WebBuild> {
  const fingerprint = webFingerprint();
  if (builtFingerprint() === fingerprint) {
    log(`dashboard build is current (${relative(process.cwd(), WEB_DIST) || WEB_DIST})`);
    return { built: false, fingerprint, dir: WEB_DIST };
  }
  log('building the dashboard (npm run build -w web)');
  const started = performance.now();
  const output = await viteBuild();
  writeFileSync(WEB_STAMP, `${JSON.stringify({ fingerprint, builtAt: new Date().toISOString() })}\n`);
  const firstLoad = /first load \(JS \+ CSS, gzip\): .*/.exec(output)?.[0];
  log(`dashboard built into ${WEB_DIST} in ${((performance.now() - started) / 1000).toFixed(1)} s${firstLoad ? `; ${firstLoad}` : ''}`);
  return { built: true, fingerprint, dir: WEB_DIST };
}

/** The last lines of a failed build's output without npm's notices and stack frames, for a message that fits a terminal. */
export function buildOutputTail(err: WebBuildError, lines = 20): string {
  const said = err.output.trimEnd().split('\n').filter((line) => !/^npm (error|warn)\b/.test(line) && !/^\s+at /.test(line));
  return said.slice(-lines).join('\n');
}

/**
 * For `npm start` and `npm run cluster`: `ensureWebBuilt`, but a failed build is printed (Vite's
 * last lines on stderr, then what to do) instead of thrown, since the API works without the
 * dashboard (the server serves the previous build, or answers 503 at /dashboard/ when there is
 * none). Answers null when web/dist is current, else a short note for the banner.
 */
export async function buildDashboardOrExplain(log: (line: string) => void): Promise<string | null> {
  try {
    await ensureWebBuilt(log);
    return null;
  } catch (err) {
    if (err instanceof WebBuildError) console.error(buildOutputTail(err));
    const reason = errorText(err);
    // Vite fails before it empties web/dist on most errors: the previous build, if any, stays served.
    const serving = existsSync(join(WEB_DIST, 'index.html')) ? 'serves the previous build' : 'answers 503';
    log(`the dashboard did not build (${reason}): fix the error above, then run npm run build:web (no restart needed); until then /dashboard/ ${serving}`);
    return `not built (${reason}): fix the error printed above, run npm run build:web, then reload; until then it ${serving}`;
  }
}

// `tsx scripts/src/web-build.ts` (`npm run build:web`): build when stale, print the outcome.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  ensureWebBuilt((line) => console.log(`web-build: ${line}`)).then(
    () => process.exit(0),
    (err: unknown) => {
      if (err instanceof WebBuildError) console.error(`${buildOutputTail(err, 40)}\nweb-build: ${err.message}: fix the error above, then run npm run build:web`);
      else console.error(`web-build: ${errorText(err)}`);
      process.exit(1);
    },
  );
}
