import { RuntimeError } from '../job/errors.js';

/**
 * Who a job runs as (pure). The image's `USER` when it names one, root included; otherwise
 * `DEFAULT_JOB_USER`. Docker is given that string unchanged, so it resolves it as `docker run`
 * would (the image's own accounts and supplementary groups); `resolveJobIds` finds the same
 * numeric ids the way Docker's resolver (runc's libcontainer/user) does, for the agent to give
 * `/output` to that user.
 */

/** The user of an image that names none: nobody:nogroup (65534) on Debian, Ubuntu, Alpine and busybox. */
export const DEFAULT_JOB_USER = '65534:65534';

/** The uid and gid the job's processes get. */
export interface JobIds {
  uid: number;
  gid: number;
}

/** The image's account files, as read from it (null: the image has none). */
export interface AccountFiles {
  passwd: string | null;
  group: string | null;
}

/** Docker's `User` for a job whose image says `imageUser` (`''` when it names none). */
export function jobUser(imageUser: string): string {
  const user = imageUser.trim();
  return user === '' ? DEFAULT_JOB_USER : user;
}

/** False when `user` is `uid:gid` in numbers: then the ids need no account file. */
export function needsAccountFiles(user: string): boolean {
  const { name, group } = splitUser(user);
  return numeric(name) === null || group === null || numeric(group) === null;
}

const MAX_ID = 2 ** 31 - 1;

/**
 * The numeric ids Docker gives `user` in an image with these account files: a number is a uid
 * (its passwd entry, if any, gives the gid; else gid 0), a name must be in /etc/passwd; an
 * explicit group is a gid or a name in /etc/group.
 *
 * @throws RuntimeError `create_failed` for a name the image's files lack (Docker would refuse to
 *   start the container), or an id out of range.
 * @example resolveJobIds('worker', { passwd: 'worker:x:1000:1000::/home:/bin/sh\n', group: null }) // { uid: 1000, gid: 1000 }
 */
export function resolveJobIds(user: string, files: AccountFiles): JobIds {
  const { name, group } = splitUser(user);
  const uidArg = numeric(name);
  const entry = parseAccounts(files.passwd, 2, 3).find((a) => (uidArg !== null ? a.id === uidArg : a.name === name));
  if (!entry && uidArg === null) {
    throw new RuntimeError('create_failed', `the image's USER ${user} is not in its /etc/passwd`);
  }
  const uid = entry ? entry.id : uidArg!;
  let gid = entry ? entry.gid : 0;
  if (group !== null) {
    const gidArg = numeric(group);
    const found = parseAccounts(files.group, 2, 2).find((g) => (gidArg !== null ? g.id === gidArg : g.name === group));
    if (!found && gidArg === null) {
      throw new RuntimeError('create_failed', `the image's USER ${user} names group ${group}, which is not in its /etc/group`);
    }
    gid = found ? found.id : gidArg!;
  }
  if (uid > MAX_ID || gid > MAX_ID) throw new RuntimeError('create_failed', `the image's USER ${user} is out of the uid/gid range`);
  return { uid, gid };
}

/** `user[:group]`; an empty user is root, as in Docker. */
function splitUser(user: string): { name: string; group: string | null } {
  const [name = '', group] = user.split(':');
  return { name: name === '' ? '0' : name, group: group === undefined || group === '' ? null : group };
}

function numeric(text: string): number | null {
  return /^\d{1,10}$/.test(text) ? Number(text) : null;
}

/** Entries of a passwd (id in field 2, gid in 3) or group (id in field 2) file; malformed lines skipped. */
function parseAccounts(text: string | null, idField: number, gidField: number): Array<{ name: string; id: number; gid: number }> {
  if (text === null) return [];
  const entries: Array<{ name: string; id: number; gid: number }> = [];
  for (const line of text.split('\n')) {
    const fields = line.trim().split(':');
    const id = numeric(fields[idField] ?? '');
    const gid = numeric(fields[gidField] ?? '');
    if (fields[0] && id !== null && gid !== null) entries.push({ name: fields[0], id, gid });
  }
  return entries;
}
