import { constants, type BigIntStats } from 'node:fs';
import { lstat, open, readdir, readlink, type FileHandle } from 'node:fs/promises';
import { GpufarmError, type AssignmentOutputRule } from '@gpufarm/shared';

/**
 * What an output rule covers, read beneath the job's `/output` without following a symlink in
 * any component: the only way out of the output mount is a symlink (the job cannot hard-link
 * a file of another filesystem, nor see one), so a walk that never follows one reads nothing
 * but the job's own files.
 *
 * Node has no openat(2), so every step names a single component relative to a folder already
 * open, through `/proc/self/fd/<fd>/<name>`: the kernel jumps to the open folder (the magic link
 * is not a symlink of the output) and resolves only `name` there, which O_NOFOLLOW refuses when
 * it is a symlink, and O_DIRECTORY when it is not a folder. Renaming a folder above does not
 * move the walk, and a name swapped for a symlink between the lstat and the open is refused by
 * the open; each open is checked against its lstat (same device and inode).
 *
 * No race is left to win in any case: the packer runs once the container has exited, when no
 * process of the job is left to change its files (Docker kills the container's whole cgroup),
 * and the loop-mounted output is `nosymfollow`, so the kernel itself refuses every symlink on
 * it in path resolution (output-mount.ts).
 */

/**
 * The job's own files cannot be packed: a rule's path goes through a symlink, a file vanished
 * or changed while being read, the job's user cannot read it, folders nested too deep. The
 * job's doing, not the machine's: its output is not stored, the job completes and is billed.
 */
export class OutputFilesError extends GpufarmError<'output_unpackable'> {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('output_unpackable', message, options);
  }
}

/** Folders below /output a rule may cover (each holds a file descriptor while it is walked). */
export const MAX_OUTPUT_DEPTH = 128;

/** One thing a rule covers, named relative to /output (`a/b.txt`); folders before their contents, in name order. */
export interface OutputEntry {
  name: string;
  kind: 'file' | 'directory' | 'symlink';
  /** Bytes of a regular file (0 for the others). */
  size: number;
  mode: number;
  mtime: Date;
  /** A symlink's target, as written (never followed). */
  linkname: string | null;
  /**
   * Opens a regular file for reading, the one the walk saw (same inode), with no symlink
   * followed and never blocking (O_NONBLOCK). Valid until the walk moves on to the next entry.
   * @throws OutputFilesError when it vanished, changed or is unreadable
   */
  open(): Promise<FileHandle>;
}

/** What the walk left out, never opened (a FIFO, socket, device node, or a name that is not UTF-8): `/output/…` and what it is. */
export interface SkippedEntry {
  path: string;
  what: string;
}

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
const FILE_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;

/** `name` inside the folder open as `dir`: the kernel resolves `name` alone, relative to it. */
const at = (dir: FileHandle, name: string) => `/proc/self/fd/${dir.fd}/${name}`;

/** How the customer sees an entry: `/output/a/b`. */
const shown = (name: string) => (name === '' ? '/output' : `/output/${name}`);

/** Opens the job's output folder (the mount the agent made; its own path, so only its last component must not be a symlink). */
export function openOutputRoot(outputDir: string): Promise<FileHandle> {
  return open(outputDir, DIR_FLAGS);
}

/**
 * Whether an error reading the job's files is the job's doing: the file or folder is gone or
 * changed (ENOENT, ENOTDIR), is a symlink or loops (ELOOP), the job's user may not read it
 * (EACCES, EPERM), or its name is too long. Anything else (EIO, EMFILE, ENOMEM…) is the
 * host's: it stays an ordinary error, which an upload retries.
 */
function jobFault(err: unknown, path: string, doing: string): Error {
  const code = (err as NodeJS.ErrnoException).code;
  switch (code) {
    case 'ENOENT':
    case 'ENOTDIR':
      return new OutputFilesError(`${path} vanished or changed while it was ${doing}`, { cause: err });
    case 'ELOOP':
      return new OutputFilesError(`${path} is a symbolic link; the agent follows none under /output`, { cause: err });
    case 'EACCES':
    case 'EPERM':
      return new OutputFilesError(`${path} cannot be ${doing} by the job's user (${code})`, { cause: err });
    case 'ENAMETOOLONG':
      return new OutputFilesError(`${path}: name too long`, { cause: err });
    default:
      return err as Error;
  }
}

async function lstatAt(dir: FileHandle, base: string, name: string): Promise<BigIntStats | null> {
  try {
    return await lstat(at(dir, base), { bigint: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return null;
    throw jobFault(err, shown(name), 'read');
  }
}

/** Opens what the walk saw as `seen`, refusing anything else in its place. */
async function openAt(dir: FileHandle, base: string, name: string, flags: number, seen: BigIntStats): Promise<FileHandle> {
  let handle: FileHandle;
  try {
    handle = await open(at(dir, base), flags);
  } catch (err) {
    throw jobFault(err, shown(name), 'read');
  }
  const now = await handle.stat({ bigint: true }).catch(async (err: unknown) => {
    await handle.close();
    throw err;
  });
  if (now.dev !== seen.dev || now.ino !== seen.ino || (now.mode & BigInt(constants.S_IFMT)) !== (seen.mode & BigInt(constants.S_IFMT))) {
    await handle.close();
    throw new OutputFilesError(`${shown(name)} changed while it was read`);
  }
  return handle;
}

/** What a special file is, for the note that says it was left out. */
function specialKind(info: BigIntStats): string {
  if (info.isFIFO()) return 'a FIFO';
  if (info.isSocket()) return 'a socket';
  if (info.isCharacterDevice()) return 'a character device';
  if (info.isBlockDevice()) return 'a block device';
  return 'not a file, folder or symlink';
}

/** The rule's path as components below /output (none for `/output` itself). */
function ruleParts(rule: AssignmentOutputRule): string[] {
  if (rule.path === '/output') return [];
  const parts = rule.path.slice('/output/'.length).split('/');
  // The API accepts only normalized paths; an assignment is checked again here, since a `..`
  // would walk up from an open folder.
  if (!rule.path.startsWith('/output/') || parts.some((p) => p === '' || p === '.' || p === '..')) {
    throw new Error(`output rule ${JSON.stringify(rule.path)} is not a normalized path under /output`);
  }
  return parts;
}

/**
 * What `rule` covers under the output folder open as `root`: regular files, folders and
 * symlinks (as symlinks, never followed), folders before their contents, names in order.
 * FIFOs, sockets and device nodes are never opened: `onSkip` hears of each. A rule's path
 * that does not exist (or runs through a regular file) covers nothing.
 *
 * @throws OutputFilesError when the rule's path runs through a symlink, an entry vanished or
 *   changed, the caller's user may not read it, or folders nest deeper than `MAX_OUTPUT_DEPTH`
 */
export async function* walkOutputRule(root: FileHandle, rule: AssignmentOutputRule, onSkip: (skipped: SkippedEntry) => void): AsyncGenerator<OutputEntry> {
  const parts = ruleParts(rule);
  const last = parts.pop();
  if (last === undefined) {
    yield* walkChildren(root, '', 0, onSkip);
    return;
  }
  const opened: FileHandle[] = [];
  try {
    let dir = root;
    let name = '';
    for (const part of parts) {
      name = name === '' ? part : `${name}/${part}`;
      const info = await lstatAt(dir, part, name);
      if (info?.isSymbolicLink()) throw new OutputFilesError(`${shown(name)} is a symbolic link; the path of an output rule (${rule.path}) is never resolved through one`);
      if (!info?.isDirectory()) return;
      dir = await openAt(dir, part, name, DIR_FLAGS, info);
      opened.push(dir);
    }
    yield* walkEntry(dir, last, name === '' ? last : `${name}/${last}`, parts.length, onSkip, true);
  } finally {
    for (const handle of opened.reverse()) await handle.close();
  }
}

async function* walkEntry(dir: FileHandle, base: string, name: string, depth: number, onSkip: (skipped: SkippedEntry) => void, mayBeMissing: boolean): AsyncGenerator<OutputEntry> {
  const info = await lstatAt(dir, base, name);
  if (!info) {
    if (mayBeMissing) return;
    throw new OutputFilesError(`${shown(name)} vanished while it was packed`);
  }
  const entry = { name, size: 0, mode: Number(info.mode) & 0o7777, mtime: info.mtime, linkname: null, open: () => Promise.reject(new Error(`${shown(name)} is not a regular file`)) };
  if (info.isSymbolicLink()) {
    let linkname: string;
    try {
      linkname = await readlink(at(dir, base));
    } catch (err) {
      throw jobFault(err, shown(name), 'read');
    }
    yield { ...entry, kind: 'symlink', linkname };
  } else if (info.isFile()) {
    yield { ...entry, kind: 'file', size: Number(info.size), open: () => openAt(dir, base, name, FILE_FLAGS, info) };
  } else if (info.isDirectory()) {
    if (depth >= MAX_OUTPUT_DEPTH) throw new OutputFilesError(`${shown(name)} is nested more than ${MAX_OUTPUT_DEPTH} folders deep under /output`);
    yield { ...entry, kind: 'directory' };
    const sub = await openAt(dir, base, name, DIR_FLAGS, info);
    try {
      yield* walkChildren(sub, name, depth + 1, onSkip);
    } finally {
      await sub.close();
    }
  } else {
    onSkip({ path: shown(name), what: specialKind(info) });
  }
}

async function* walkChildren(dir: FileHandle, name: string, depth: number, onSkip: (skipped: SkippedEntry) => void): AsyncGenerator<OutputEntry> {
  let raw: Buffer[];
  try {
    raw = await readdir(`/proc/self/fd/${dir.fd}`, { encoding: 'buffer' });
  } catch (err) {
    throw jobFault(err, shown(name), 'listed');
  }
  const names = raw.map((bytes) => ({ bytes, text: bytes.toString('utf8') })).sort((a, b) => (a.text < b.text ? -1 : a.text > b.text ? 1 : 0));
  for (const child of names) {
    const childName = name === '' ? child.text : `${name}/${child.text}`;
    // A tar entry's name is text: a name that is not UTF-8 cannot be archived as it is.
    if (!Buffer.from(child.text).equals(child.bytes)) onSkip({ path: shown(childName), what: 'a name that is not UTF-8' });
    else yield* walkEntry(dir, child.text, childName, depth, onSkip, false);
  }
}

/** What a rule covers, measured before packing. */
export interface RuleSurvey {
  /** Bytes of its regular files (a lower bound of its tar's size). */
  contentBytes: number;
  /** What its archive leaves out. */
  skipped: SkippedEntry[];
}

/**
 * Measures what `rule` covers under `outputDir` (the same walk as packing, without opening a
 * file), as this process's user.
 * @throws OutputFilesError as `walkOutputRule`
 */
export async function surveyOutputRule(outputDir: string, rule: AssignmentOutputRule): Promise<RuleSurvey> {
  const survey: RuleSurvey = { contentBytes: 0, skipped: [] };
  const root = await openOutputRoot(outputDir);
  try {
    for await (const e of walkOutputRule(root, rule, (s) => survey.skipped.push(s))) survey.contentBytes += e.size;
  } finally {
    await root.close();
  }
  return survey;
}
