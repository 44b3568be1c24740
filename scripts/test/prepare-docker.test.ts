import { execFile } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

/**
 * `scripts/prepare-docker.sh`, which `npm start` and `npm test` run, against the machine's own
 * Docker Engine and registry (left running), and as the unprivileged user `nobody`, who can
 * start nothing and must be told exactly what to run.
 */

const SCRIPT = fileURLToPath(new URL('../prepare-docker.sh', import.meta.url));
// `nobody` runs a copy in a folder anyone may read: the checkout may be where only root can
// (a clone under /root), and what is tested is the script, not the checkout's permissions.
const readable = mkdtempSync(join(tmpdir(), 'gf-prepare-docker-script-'));
chmodSync(readable, 0o755);
const SCRIPT_FOR_ANYONE = join(readable, 'prepare-docker.sh');
copyFileSync(SCRIPT, SCRIPT_FOR_ANYONE);
chmodSync(SCRIPT_FOR_ANYONE, 0o644);
t.teardown(() => rmSync(readable, { recursive: true, force: true }));
const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** The script with only `env` in its environment, as root or (`asNobody`) as `nobody` through runuser. */
function prepare(env: Record<string, string>, asNobody: boolean): Promise<Run> {
  const vars = Object.entries({ PATH: SYSTEM_PATH, HOME: '/nonexistent', ...env }).map(([k, v]) => `${k}=${v}`);
  const command = asNobody ? ['runuser', '-u', 'nobody', '--', 'env', '-i', ...vars, '/bin/bash', SCRIPT_FOR_ANYONE] : ['env', '-i', ...vars, '/bin/bash', SCRIPT];
  return new Promise((resolve) => {
    execFile(command[0]!, command.slice(1), { timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

t.test('behavior: with Docker Engine and the registry answering, it starts nothing and says so', async (t) => {
  const run = await prepare({}, false);
  t.equal(run.code, 0, run.stderr);
  t.match(run.stdout, /^prepare-docker: Docker Engine \S+ answers on \/var\/run\/docker\.sock, the registry on http:\/\/127\.0\.0\.1:5000\/v2\/$/m);
  t.notMatch(run.stdout, /starting/, 'nothing was started');
});

t.test('behavior: as a user who may not start dockerd, a socket that does not answer gets the exact command to start it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gf-prepare-docker-'));
  chmodSync(dir, 0o755);
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const socket = join(dir, 'docker.sock');
  const run = await prepare({ DOCKER_HOST: `unix://${socket}` }, true);
  t.equal(run.code, 1, 'exits non-zero');
  t.equal(
    run.stderr.trim(),
    `prepare-docker: Docker Engine does not answer on ${socket}. Start it with: sudo sh -c 'dockerd -H unix://${socket} >>/var/log/gpufarm-dockerd.log 2>&1 & echo $! >/tmp/gpufarm-dockerd.pid'`,
  );
});

t.test('behavior: a user outside the docker group is told how to join it', async (t) => {
  const run = await prepare({}, true);
  t.equal(run.code, 1);
  t.equal(run.stderr.trim(), 'prepare-docker: Docker Engine does not answer on /var/run/docker.sock for this user, who may not use that socket. Add yourself to the docker group: sudo usermod -aG docker nobody (then log in again)');
});

t.test('behavior: a machine without dockerd and docker-registry gets the exact apt-get line', async (t) => {
  // A PATH holding every command the script checks for except the two Docker daemons.
  const bin = mkdtempSync(join(tmpdir(), 'gf-prepare-docker-bin-'));
  chmodSync(bin, 0o755);
  t.teardown(() => rmSync(bin, { recursive: true, force: true }));
  for (const name of ['id', 'ldd', 'gcc', 'mkfs.ext4', 'curl', 'docker']) {
    const found = await new Promise<string>((resolve) => execFile('/bin/sh', ['-c', `command -v ${name}`], { env: { PATH: SYSTEM_PATH } }, (_e, out) => resolve(out.trim())));
    t.ok(found, `${name} is installed here`);
    symlinkSync(found, join(bin, name));
  }
  const run = await prepare({ PATH: bin }, true);
  t.equal(run.code, 1);
  t.equal(
    run.stderr.trim(),
    'prepare-docker: Docker Engine and the image build need packages that are missing. Install them with: sudo apt-get update && sudo apt-get install -y --no-install-recommends docker.io docker-registry',
  );
});
