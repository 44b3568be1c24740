import t from 'tap';
import { DEFAULT_JOB_USER, jobUser, needsAccountFiles, resolveJobIds } from '../src/runtime/job-user.js';

const passwd = 'root:x:0:0:root:/root:/bin/sh\n\nworker:x:1000:1001:Worker:/home/worker:/bin/sh\nnobody:x:65534:65534::/:/bin/false\nbroken line\n';
const group = 'root:x:0:\nworker:x:1001:\nstaff:x:50:worker\n';
const files = { passwd, group };

t.test('default: an image without USER gets 65534:65534, resolved without its files', async (t) => {
  t.equal(jobUser(''), DEFAULT_JOB_USER);
  t.equal(DEFAULT_JOB_USER, '65534:65534');
  t.equal(needsAccountFiles(DEFAULT_JOB_USER), false);
  t.same(resolveJobIds(DEFAULT_JOB_USER, { passwd: null, group: null }), { uid: 65534, gid: 65534 });
});

t.test("args: the image's USER, resolved as Docker does", async (t) => {
  t.equal(jobUser('worker'), 'worker');
  t.equal(jobUser('root'), 'root');
  const cases: Array<[string, { uid: number; gid: number }, string]> = [
    ['worker', { uid: 1000, gid: 1001 }, 'a name: its passwd entry'],
    ['1000', { uid: 1000, gid: 1001 }, 'a uid with an entry: its gid'],
    ['4242', { uid: 4242, gid: 0 }, 'a uid without an entry: gid 0'],
    ['worker:staff', { uid: 1000, gid: 50 }, 'a group name'],
    ['worker:77', { uid: 1000, gid: 77 }, 'a gid without an entry'],
    ['root', { uid: 0, gid: 0 }, 'root by name'],
    ['0', { uid: 0, gid: 0 }, 'root by uid'],
    [':50', { uid: 0, gid: 50 }, 'an empty user is root'],
  ];
  for (const [user, ids, why] of cases) t.same(resolveJobIds(user, files), ids, `${user}: ${why}`);
  t.same(resolveJobIds('4242', { passwd: null, group: null }), { uid: 4242, gid: 0 }, 'a uid in an image without /etc/passwd');
  t.equal(needsAccountFiles('1000'), true, 'a uid alone needs passwd for its gid');
  t.equal(needsAccountFiles('worker:50'), true);
  t.equal(needsAccountFiles('1000:50'), false);
});

t.test('error: create_failed for names the image does not have', async (t) => {
  t.throws(() => resolveJobIds('ghost', files), { code: 'create_failed', message: "the image's USER ghost is not in its /etc/passwd" });
  t.throws(() => resolveJobIds('root', { passwd: null, group: null }), { code: 'create_failed' }, 'no /etc/passwd at all');
  t.throws(() => resolveJobIds('worker:ghosts', files), { code: 'create_failed', message: /group ghosts, which is not in its \/etc\/group/ });
  t.throws(() => resolveJobIds('4294967296', files), { code: 'create_failed' }, 'past the id range');
});
