import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { bundleNodePackage } from '@gpufarm/shared/build/node-package';
import { onEmergencyExit } from '@gpufarm/shared/build/emergency-exit';

const ROOT = resolve(import.meta.dirname, '../../..');
const CLIENT = join(ROOT, 'client');

// gf is bundled from the sources once per test process, as `npm run build -w client` bundles it:
// a bundled start costs a fraction of the CPU of one through tsx, and these tests start gf many
// times. The folder sits under node_modules so the bundle's dependencies (zod, viem) resolve.
const cache = join(ROOT, 'node_modules/.cache');
mkdirSync(cache, { recursive: true });
const BUILD = mkdtempSync(join(cache, 'gf-test-'));
process.on('exit', () => rmSync(BUILD, { recursive: true, force: true }));
await bundleNodePackage({ packageDir: CLIENT, entryPoints: { gf: 'src/cli/main.ts' }, commands: ['gf'], splitting: true, outDir: BUILD });
// ES modules, as client/package.json declares for dist/: Node before 20.19 does not guess it from the syntax.
writeFileSync(join(BUILD, 'package.json'), '{ "type": "module" }\n');
const GF = join(BUILD, 'gf.js');

export interface GfRun {
  code: number;
  stdout: string;
  stderr: string;
}

export interface GfHome {
  /** The HOME (and, unless `xdg` is false, XDG_CONFIG_HOME) the CLI sees. */
  home: string;
  configDir: string;
  env: Record<string, string>;
}

/** A fresh HOME and XDG_CONFIG_HOME for one test, removed at its end. */
export function gfHome(t: { teardown(fn: () => unknown): void }): GfHome {
  const home = mkdtempSync(join(tmpdir(), 'gf-cli-home-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const configDir = join(home, 'xdg');
  return { home, configDir: join(configDir, 'gpufarm'), env: { HOME: home, XDG_CONFIG_HOME: configDir } };
}

/** The command line that runs `gf args` (for `script`, which gives it a terminal). */
export function gfCommandLine(args: string[]): string[] {
  return [process.execPath, GF, ...args];
}

/**
 * Runs `gf args` as a child process (the bundled gf.js), without the caller's GF_*
 * variables, with `env` added and `input` on stdin; answers its exit code and output.
 */
export function gf(args: string[], options: { env?: Record<string, string>; input?: string; cwd?: string } = {}): Promise<GfRun> {
  return runGf(gfCommandLine(args), options);
}

/**
 * Runs `gf args` on a terminal: script(1) gives it a pseudo-terminal, whose output (stdout and
 * stderr together, with control codes) is `stdout`.
 */
export function gfOnTerminal(args: string[], options: { env?: Record<string, string>; input?: string } = {}): Promise<GfRun> {
  return runGf(['script', '-qec', gfShellLine(args), '/dev/null'], options);
}

/** `gfCommandLine(args)` quoted for a shell. */
export function gfShellLine(args: string[]): string {
  return gfCommandLine(args)
    .map((a) => `'${a.replaceAll("'", "'\\''")}'`)
    .join(' ');
}

function runGf(commandLine: string[], options: { env?: Record<string, string>; input?: string; cwd?: string }): Promise<GfRun> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined && !name.startsWith('GF_')) env[name] = value;
  Object.assign(env, options.env);
  return new Promise((resolvePromise, reject) => {
    const [command, ...argv] = commandLine;
    const child = spawn(command!, argv, { cwd: options.cwd ?? ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    // Killed with this test process too (tap's time limit): an orphaned gf, its pipes gone, was
    // seen spinning a core for an hour and slowing every later run.
    const pid = child.pid;
    const forget = pid === undefined ? () => false : onEmergencyExit(() => process.kill(pid, 'SIGKILL'));
    child.on('error', reject);
    child.on('close', (code) => {
      forget();
      resolvePromise({ code: code ?? -1, stdout, stderr });
    });
    child.stdin.end(options.input ?? '');
  });
}
