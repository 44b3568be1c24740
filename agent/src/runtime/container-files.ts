import { posix } from 'node:path';
import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import tar from 'tar-stream';
import { RuntimeError } from '../job/errors.js';
import { needsAccountFiles, resolveJobIds, type AccountFiles, type JobIds } from './job-user.js';

/** Account files bigger than this are refused rather than read into memory. */
export const MAX_ACCOUNT_FILE_BYTES = 1024 * 1024;
/** Symbolic links followed from one path: the kernel's limit (Docker refuses loops itself). */
const MAX_LINKS = 40;

/**
 * The ids Docker will give `user` in this created container, reading its account files only
 * when `user` is not `uid:gid` in numbers.
 * @throws RuntimeError `create_failed` (see `resolveJobIds`, `readContainerFile`)
 */
export async function jobIdsIn(container: Docker.Container, user: string): Promise<JobIds> {
  return resolveJobIds(user, needsAccountFiles(user) ? await readAccountFiles(container) : { passwd: null, group: null });
}

/** `/etc/passwd` and `/etc/group` of a created container's image (null when absent). */
export async function readAccountFiles(container: Docker.Container): Promise<AccountFiles> {
  const [passwd, group] = await Promise.all([readContainerFile(container, '/etc/passwd'), readContainerFile(container, '/etc/group')]);
  return { passwd: passwd?.toString('utf8') ?? null, group: group?.toString('utf8') ?? null };
}

/**
 * A regular file of a container (created or stopped: Docker's archive API needs no running
 * process), following symbolic links inside the container as Docker's own user lookup does.
 * Null when the path does not exist or is not a file.
 *
 * @throws RuntimeError `create_failed` when the file passes `MAX_ACCOUNT_FILE_BYTES`, the links
 *   loop, or Docker fails otherwise.
 */
export async function readContainerFile(container: Docker.Container, path: string): Promise<Buffer | null> {
  let current = path;
  for (let hop = 0; hop <= MAX_LINKS; hop++) {
    const entry = await firstEntry(container, current);
    if (entry === null) return null;
    if (entry.kind === 'file') return entry.bytes;
    if (entry.kind !== 'symlink') return null;
    current = posix.resolve(posix.dirname(current), entry.target);
  }
  throw new RuntimeError('create_failed', `${path} in the image: more than ${MAX_LINKS} symbolic links`);
}

type Entry = { kind: 'file'; bytes: Buffer } | { kind: 'symlink'; target: string } | { kind: 'other' };

async function firstEntry(container: Docker.Container, path: string): Promise<Entry | null> {
  let archive: NodeJS.ReadableStream;
  try {
    archive = (await container.getArchive({ path })) as NodeJS.ReadableStream;
  } catch (err) {
    const status = (err as { statusCode?: number }).statusCode;
    if (status === 404) return null;
    // Docker's text names its storage folders on the host: it stays in the cause, out of the job's message.
    throw new RuntimeError('create_failed', `reading ${path} from the image failed (Docker answered ${status ?? 'nothing'})`, { cause: err });
  }
  const extract = tar.extract();
  let first: Entry | null = null;
  let seen = false;
  extract.on('entry', (header, stream, next) => {
    // The archive of one path: its first entry is the path itself (a folder's files follow).
    const isFirst = !seen;
    seen = true;
    const chunks: Buffer[] = [];
    stream.on('end', () => {
      if (isFirst && header.type === 'file') first = { kind: 'file', bytes: Buffer.concat(chunks) };
      next();
    });
    if (isFirst && header.type === 'symlink') first = { kind: 'symlink', target: header.linkname ?? '' };
    else if (isFirst && header.type !== 'file') first = { kind: 'other' };
    if (!isFirst || header.type !== 'file') {
      stream.resume();
    } else if ((header.size ?? 0) > MAX_ACCOUNT_FILE_BYTES) {
      extract.destroy(new RuntimeError('create_failed', `${path} in the image is more than ${MAX_ACCOUNT_FILE_BYTES} bytes`));
    } else {
      stream.on('data', (c: unknown) => chunks.push(c as Buffer));
    }
  });
  try {
    await new Promise<void>((resolve, reject) => {
      extract.on('finish', resolve).on('error', reject);
      archive.on('error', reject);
      archive.pipe(extract);
    });
  } catch (err) {
    (archive as Readable).destroy();
    throw err instanceof RuntimeError ? err : new RuntimeError('create_failed', `reading ${path} from the image failed: its archive broke off`, { cause: err });
  }
  return first;
}
