import { execFile } from 'node:child_process';
import { chmod, chown, mkdir, readdir, readFile, rm, stat, statfs, lstat, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { AssignmentOutputRule } from '@gpufarm/shared';
import type { JobIds } from './job-user.js';
import { errorText } from '@gpufarm/shared';

const run = promisify(execFile);

/**
 * The `/output` mount of one job. Preferred: a sparse file of the outputs' size formatted ext4
 * and loop-mounted (`loop`): writing past it gives ENOSPC inside the container. Where the host
 * refuses (no root, no loop devices), a plain folder (`watchdog`): the runtime measures it
 * every `WATCHDOG_INTERVAL_MS` and stops the job once it holds more than the limit.
 */
export interface OutputMount {
  kind: 'loop' | 'watchdog';
  /** The folder bind-mounted at `/output`. */
  dir: string;
  /** Bytes the job may write under /output. */
  limitBytes: number;
  /** Why the loop mount was not used (watchdog only). */
  reason: string | null;
  /**
   * Loop only: mounted `nosymfollow`, so the kernel follows no symlink on it (Linux 5.10 and
   * later; an older kernel refuses the option, and the packer's own walk is then the guard).
   */
  nosymfollow: boolean;
}

/**
 * Options of the loop mount: nothing set-uid, no device node and nothing executable from the
 * host's side, and no symlink followed (the packer reads the job's files as root or as the
 * job's user: a symlink left there must never lead it elsewhere).
 */
const LOOP_OPTIONS = 'loop,nosuid,nodev,noexec';

export const WATCHDOG_INTERVAL_MS = 1000;
/** ext4 keeps some of the file for itself (inode tables, journal); the file gets this much more. */
export function loopImageBytes(limitBytes: number): number {
  return Math.ceil(limitBytes * 1.0625) + 512 * 1024;
}

/**
 * Bytes the job may write: a rule on `/output` itself bounds everything; otherwise the sum of
 * the rules (each rule's own limit is enforced exactly when it is packed).
 */
export function outputLimitBytes(rules: AssignmentOutputRule[]): number {
  const whole = rules.find((r) => r.path === '/output');
  return whole ? whole.maxBytes : rules.reduce((n, r) => n + r.maxBytes, 0);
}

/** Makes the mount under `workdir` (`output.img`, `output/`). Idempotent for a mount already there. */
export async function prepareOutputMount(workdir: string, rules: AssignmentOutputRule[], opts: { allowLoop?: boolean } = {}): Promise<OutputMount> {
  const limitBytes = outputLimitBytes(rules);
  const dir = join(workdir, 'output');
  await mkdir(dir, { recursive: true });
  if (await isMountPoint(dir)) return { kind: 'loop', dir, limitBytes, reason: null, nosymfollow: await mountedNosymfollow(dir) };
  let reason: string;
  if (opts.allowLoop === false) {
    reason = 'loop mounts disabled by configuration';
  } else if (process.getuid?.() !== 0) {
    reason = 'the agent does not run as root, so it cannot loop-mount a filesystem';
  } else if (!(await hasRoom(workdir, loopImageBytes(limitBytes)))) {
    // A sparse image larger than the free space would fail the job's writes with I/O errors
    // once the host's disk is full; the watchdog at least stops it cleanly.
    reason = `less than ${loopImageBytes(limitBytes)} bytes free for the output image`;
  } else {
    const image = join(workdir, 'output.img');
    try {
      await writeFile(image, '');
      await truncate(image, loopImageBytes(limitBytes));
      await run('mkfs.ext4', ['-q', '-F', '-m', '0', '-O', '^has_journal', image]);
      // A kernel before 5.10 refuses nosymfollow: mounted without it rather than not at all.
      const nosymfollow = await run('mount', ['-o', `${LOOP_OPTIONS},nosymfollow`, image, dir]).then(
        () => true,
        async () => {
          await run('mount', ['-o', LOOP_OPTIONS, image, dir]);
          return false;
        },
      );
      await rm(join(dir, 'lost+found'), { recursive: true, force: true });
      // Open until `giveOutputTo` knows the job's user.
      await chmod(dir, 0o777);
      return { kind: 'loop', dir, limitBytes, reason: null, nosymfollow };
    } catch (err) {
      reason = `loop mount failed: ${((err as { stderr?: string }).stderr || errorText(err)).trim()}`;
      await rm(image, { force: true });
    }
  }
  await chmod(dir, 0o777);
  return { kind: 'watchdog', dir, limitBytes, reason, nosymfollow: false };
}

/**
 * Makes `/output` the job user's: owned by its uid:gid with mode 0755, so the job writes there
 * without DAC_OVERRIDE or FOWNER. Only root may give a folder away; an agent that is not root
 * leaves it 0777 (writable by any user of the job, as by any user of the host who can reach
 * the state folder). Returns whether the folder was given.
 */
export async function giveOutputTo(dir: string, ids: JobIds): Promise<boolean> {
  if (process.getuid?.() !== 0) return false;
  await chown(dir, ids.uid, ids.gid);
  await chmod(dir, 0o755);
  return true;
}

/** Unmounts (when loop-mounted) and deletes the image file; the folder's files stay until the workdir goes. */
export async function releaseOutputMount(workdir: string): Promise<void> {
  const dir = join(workdir, 'output');
  if (await isMountPoint(dir)) {
    // -d frees the loop device too.
    await run('umount', ['-d', dir]).catch(async () => run('umount', ['-l', '-d', dir]));
  }
  await rm(join(workdir, 'output.img'), { force: true });
}

/** Whether the mount at `dir` has the `nosymfollow` option (from /proc/self/mountinfo). */
async function mountedNosymfollow(dir: string): Promise<boolean> {
  const info = await readFile('/proc/self/mountinfo', 'utf8').catch(() => '');
  // Fields: id, parent, major:minor, root, mount point (octal escapes), options, …
  const line = info.split('\n').find((l) => unescapeMountPath(l.split(' ')[4] ?? '') === dir);
  return line?.split(' ')[5]?.split(',').includes('nosymfollow') ?? false;
}

function unescapeMountPath(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/** True when `dir` is a mount point (its device differs from its parent's). */
export async function isMountPoint(dir: string): Promise<boolean> {
  try {
    const [a, b] = await Promise.all([stat(dir), stat(join(dir, '..'))]);
    return a.dev !== b.dev;
  } catch {
    return false;
  }
}

/** Bytes of regular files under `dir` (the watchdog's measure; symlinks are not followed). */
export async function treeBytes(dir: string): Promise<number> {
  let total = 0;
  let entries: string[];
  try {
    entries = await readdir(dir);
  } catch {
    return 0;
  }
  for (const name of entries) {
    const path = join(dir, name);
    const info = await lstat(path).catch(() => null);
    if (!info) continue;
    if (info.isDirectory()) total += await treeBytes(path);
    else if (info.isFile()) total += info.blocks * 512 > info.size ? info.blocks * 512 : info.size;
  }
  return total;
}

async function hasRoom(dir: string, bytes: number): Promise<boolean> {
  try {
    const fs = await statfs(dir);
    return fs.bavail * fs.bsize >= bytes;
  } catch {
    return true;
  }
}
