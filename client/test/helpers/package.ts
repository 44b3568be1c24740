import { execFile } from 'node:child_process';
import { mkdir, readdir, readFile, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * Runs a command as on a machine without this repository: none of the `npm_*` settings the running
 * `npm test` passes down, and no NODE_OPTIONS, whose source condition would point workspace
 * packages at TypeScript files a package does not ship. `env -u` drops it after the test runner
 * has put it back into the child's environment (tap does that for every child).
 */
export function outside(command: string, args: string[], cwd: string, extraEnv: Record<string, string> = {}, input?: string) {
  const env = { ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.toLowerCase().startsWith('npm_'))), ...extraEnv };
  const child = run('env', ['-u', 'NODE_OPTIONS', command, ...args], { cwd, env, maxBuffer: 16 * 1024 * 1024 });
  if (input !== undefined) child.child.stdin?.end(input);
  return child;
}

/** Files under `dir` (a package's `dist/`) that still import a workspace package (`@gpufarm/…`). */
export async function workspaceImportsUnder(dir: string): Promise<string[]> {
  // Relative names rather than Dirents: `Dirent.parentPath` is newer than the oldest Node the client supports.
  const found: string[] = [];
  for (const name of await readdir(dir, { recursive: true })) {
    const file = join(dir, name);
    if (!(await stat(file)).isFile()) continue;
    const text = await readFile(file, 'utf8');
    if (/(?:from|import)\s*\(?\s*["']@gpufarm\//.test(text) || /require\(\s*["']@gpufarm\//.test(text)) found.push(name);
  }
  return found;
}

export interface PackedWorkspace {
  tarball: string;
  /** The paths in the tarball (below `package/`), sorted. */
  paths: string[];
  /** The tarball unpacked (its `package/` folder). */
  dir: string;
  manifest: { version: string; dependencies?: Record<string, string>; bin?: Record<string, string> };
}

/**
 * `npm pack -w <workspace>` into `work` (prepack builds it first), unpacked beside the tarball.
 * One pack of a workspace at a time (flock): prepack empties and rebuilds its `dist/`, and the
 * client's tests run on two Node versions at once (scripts/run-tests.sh).
 */
export async function packWorkspace(root: string, workspace: string, work: string): Promise<PackedWorkspace> {
  const lock = join(root, 'node_modules/.cache', `pack-${workspace}.lock`);
  await mkdir(dirname(lock), { recursive: true });
  const packed = await run('flock', [lock, 'npm', 'pack', '-w', workspace, '--pack-destination', work, '--json'], { cwd: root, maxBuffer: 16 * 1024 * 1024 });
  const [report] = JSON.parse(packed.stdout) as Array<{ filename: string }>;
  if (!report) throw new Error(`npm pack -w ${workspace} reported no tarball: ${packed.stdout}`);
  return unpackTarball(join(work, report.filename), work);
}

/** An npm tarball unpacked into `<work>/unpacked`. */
export async function unpackTarball(tarball: string, work: string): Promise<PackedWorkspace> {
  const listed = await run('tar', ['-tzf', tarball]);
  const paths = listed.stdout.split('\n').filter(Boolean).map((p) => p.replace(/^package\//, '')).sort();
  const unpacked = join(work, 'unpacked');
  await mkdir(unpacked, { recursive: true });
  await run('tar', ['-xzf', tarball, '-C', unpacked]);
  const dir = join(unpacked, 'package');
  const manifest = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8')) as PackedWorkspace['manifest'];
  return { tarball, paths, dir, manifest };
}

/** `npm install -g` of a tarball into the prefix `<work>/prefix`, outside the repository; returns the prefix. */
export async function installGlobally(tarball: string, work: string): Promise<string> {
  const prefix = join(work, 'prefix');
  await outside('npm', ['install', '-g', '--prefix', prefix, tarball, '--no-audit', '--no-fund'], work);
  return prefix;
}
