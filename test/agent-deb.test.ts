import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { agentConfigSchema } from '../agent/src/config/config.js';
import { systemdUnit } from '../agent/src/service/systemd.js';
import { enrollAgent } from './helpers/agent.js';
import { Customer, linesOf } from './helpers/customer.js';
import { busyboxSpec } from './helpers/jobs.js';
import { Marketplace, ROOT } from './helpers/marketplace.js';

/**
 * The agent's .deb (scripts/build-agent-deb.sh): its fields and files, then a real `dpkg -i` in a
 * throwaway root, a copy-on-write view of this Debian machine (overlayfs over `/`, entered with
 * chroot): dpkg checks the dependencies against what this machine has installed (nodejs,
 * adduser) and runs the maintainer scripts for real, and every write lands in the overlay, not
 * here. The installed gf-agent then prints its version, passes doctor as the gf-agent user,
 * enrolls and runs a job; a purge removes it.
 */

// A pack, an install from the registry, a marketplace and a container: minutes.
t.setTimeout(300_000);

const run = promisify(execFile);
/** PATH inside the throwaway root: the system's, as a service or a login shell has it. */
const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** Runs the rest as the gf-agent user and its groups, as the service does; it execs, so a kill reaches gf-agent itself. */
const AS_AGENT_USER = ['setpriv', '--reuid=gf-agent', '--regid=gf-agent', '--init-groups', '--'];

/**
 * A copy-on-write view of this machine's root file system (overlayfs: `/` below, a folder of
 * our own above), with /proc, /dev, /tmp and the Docker socket of this machine mounted in.
 */
class ThrowawayRoot {
  private constructor(
    private readonly base: string,
    private readonly mounts: string[],
  ) {}

  /** The folders under `parent`; nothing mounted yet (`mountAll`), so a teardown can be in place first. */
  static in(parent: string): ThrowawayRoot {
    return new ThrowawayRoot(join(parent, 'overlay'), []);
  }

  get dir(): string {
    return join(this.base, 'root');
  }

  async mountAll(): Promise<void> {
    const [upper, workdir, dir] = ['upper', 'work', 'root'].map((name) => join(this.base, name)) as [string, string, string];
    for (const d of [upper, workdir, dir]) await mkdir(d, { recursive: true });
    await this.mount(['-t', 'overlay', 'overlay', '-o', `lowerdir=/,upperdir=${upper},workdir=${workdir}`, dir], dir);
    for (const shared of ['/proc', '/dev', '/tmp']) await this.mount(['--bind', shared, join(dir, shared)], join(dir, shared));
    // A socket seen through overlayfs refuses connections; the real one is mounted over it.
    const socket = join(dir, 'run/docker.sock');
    if (!existsSync(socket)) await writeFile(socket, '');
    await this.mount(['--bind', '/run/docker.sock', socket], socket);
  }

  private async mount(args: string[], target: string): Promise<void> {
    await run('mount', args);
    this.mounts.push(target);
  }

  /** Unmounts everything; true when nothing is mounted under the root any more, so its folder may be deleted. */
  async destroy(): Promise<boolean> {
    for (const target of this.mounts.reverse()) await run('umount', [target]).catch(() => run('umount', ['-l', target]).catch(() => undefined));
    const mounted = (await readFile('/proc/mounts', 'utf8')).split('\n').map((line) => line.split(' ')[1] ?? '');
    return !mounted.some((point) => point.startsWith(this.base));
  }
}

const work = await mkdtemp(join(tmpdir(), 'gf-agent-deb-'));
const version = (JSON.parse(await readFile(join(ROOT, 'agent/package.json'), 'utf8')) as { version: string }).version;
const built = await run('bash', [join(ROOT, 'scripts/build-agent-deb.sh'), '--out', join(work, 'out')], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 });
const [tarball, deb] = built.stdout.trim().split('\n');
const throwaway = ThrowawayRoot.in(work);
t.teardown(async () => {
  // Deleting a folder with this machine's /tmp or /dev still mounted in it would delete theirs.
  if (await throwaway.destroy()) await rm(work, { recursive: true, force: true });
  else console.error(`agent-deb: mounts are left under ${work}; it was not deleted`);
});
await throwaway.mountAll();

/** Runs a command in the throwaway root with the system's PATH and no NODE_OPTIONS; never rejects. */
async function inRoot(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return run('chroot', [throwaway.dir, 'env', '-u', 'NODE_OPTIONS', `PATH=${SYSTEM_PATH}`, ...args], { maxBuffer: 16 * 1024 * 1024 }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (err: { code?: number; stdout?: string; stderr?: string }) => ({ code: err.code ?? 1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' }),
  );
}

t.test('default: the .deb is built from the npm tarball with its fields, the app under /usr/lib/gf-agent, the command, the unit and the conffile', async (t) => {
  t.ok(tarball && existsSync(tarball), `the script wrote the npm tarball beside it (${tarball})`);
  t.equal(deb, join(work, 'out', `gf-agent_${version}_all.deb`), 'named gf-agent_<version>_all.deb');
  const field = async (name: string) => (await run('dpkg-deb', ['-f', deb!, name])).stdout.trim();
  t.equal(await field('Package'), 'gf-agent');
  t.equal(await field('Version'), version, 'the version of agent/package.json');
  t.equal(await field('Architecture'), 'all', 'no compiled code: every architecture');
  t.equal(await field('Depends'), 'nodejs (>= 20.11), adduser', 'Node 20.11 or newer from the system, adduser for the postinst');
  t.match(await field('Recommends'), /docker\.io/, 'Docker recommended');

  const listing = (await run('dpkg-deb', ['-c', deb!], { maxBuffer: 64 * 1024 * 1024 })).stdout.split('\n');
  const paths = listing.map((line) => line.split(/\s+/).slice(5).join(' ')).filter(Boolean);
  for (const path of ['./usr/lib/gf-agent/dist/gf-agent.js', './usr/lib/gf-agent/dist/pack-worker.js', './usr/lib/gf-agent/package.json', './usr/lib/gf-agent/README.md', './usr/lib/gf-agent/node_modules/dockerode/package.json', './usr/lib/gf-agent/node_modules/systeminformation/package.json', './usr/lib/systemd/system/gf-agent.service', './etc/gf-agent/agent.toml']) {
    t.ok(paths.includes(path), `${path} is in the package`);
  }
  t.ok(paths.includes('./usr/bin/gf-agent -> ../lib/gf-agent/dist/gf-agent.js'), '/usr/bin/gf-agent links to the compiled command');
  t.same(paths.filter((p) => p.startsWith('./usr/lib/gf-agent/node_modules/@gpufarm/') || /\/node_modules\/(tsx|typescript)\//.test(p)), [], 'no workspace package, no tsx, no typescript');
  t.same(paths.filter((p) => p.endsWith('.node')), [], 'no native addon');
  t.same(listing.filter((l) => l && !l.includes(' root/root ')), [], 'every file is owned by root');

  const conffiles = (await run('dpkg-deb', ['-I', deb!, 'conffiles'])).stdout;
  t.equal(conffiles, '/etc/gf-agent/agent.toml\n', 'agent.toml is a conffile: an upgrade keeps local edits');
  const fsys = async (path: string) => (await run('sh', ['-c', 'dpkg-deb --fsys-tarfile "$1" | tar -xOf - "$2"', 'sh', deb!, path])).stdout;
  const unit = await fsys('./usr/lib/systemd/system/gf-agent.service');
  t.equal(
    unit,
    systemdUnit({ execStart: '/usr/bin/gf-agent run', configPath: null, stateDir: '/var/lib/gf-agent', user: 'gf-agent', documentation: 'file:///usr/lib/gf-agent/README.md' }),
    'the unit is the text gf-agent install-service writes, for the gf-agent user, pointing at the packaged README',
  );
  const toml = await fsys('./etc/gf-agent/agent.toml');
  const listed = [...toml.matchAll(/^# ([a-z_]+) = /gm)].map((m) => m[1]).sort();
  const known = Object.keys(agentConfigSchema.shape).map((k) => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)).sort();
  t.same(listed, known, 'agent.toml lists every setting the agent reads, and no other');
  t.notMatch(toml, /^[a-z_]+ = /m, 'all of them commented: the defaults apply');
});

t.test('default: dpkg -i installs it in a throwaway root: the user, the state folder, the conffile; gf-agent --version and doctor run, and so does a job', async (t) => {
  const install = await inRoot(['dpkg', '-i', deb!]);
  t.equal(install.code, 0, `dpkg -i succeeds:\n${install.stdout}${install.stderr}`);
  t.match(install.stdout, /gf-agent enroll/, 'the postinst says how to enroll');
  const user = (await inRoot(['getent', 'passwd', 'gf-agent'])).stdout.trim().split(':');
  t.equal(user[5], '/var/lib/gf-agent', 'a system user gf-agent with its home at the state folder');
  t.ok(Number(user[2]) < 1000, `a system uid (${user[2]})`);
  t.match((await inRoot(['id', '-nG', 'gf-agent'])).stdout, /\bdocker\b/, 'in the docker group');
  t.equal((await inRoot(['stat', '-c', '%U:%G %a', '/var/lib/gf-agent'])).stdout.trim(), 'gf-agent:gf-agent 700', '/var/lib/gf-agent belongs to it, mode 0700');
  t.match((await inRoot(['dpkg-query', '-W', '-f=${Conffiles}', 'gf-agent'])).stdout, /\/etc\/gf-agent\/agent\.toml [0-9a-f]{32}/, 'dpkg records agent.toml as a conffile');
  t.notOk(existsSync('/usr/lib/gf-agent') || existsSync('/etc/gf-agent'), 'nothing was installed on this machine itself');

  const versionOut = await inRoot(['gf-agent', '--version']);
  t.equal(versionOut.stdout.trim(), version, 'the installed gf-agent --version prints the package version');
  const doctor = await inRoot([...AS_AGENT_USER, 'gf-agent', 'doctor', '--json', '--simulate-gpus', '1x rtx-4090-24gb']);
  const checks = JSON.parse(doctor.stdout) as Array<{ name: string; status: string; detail: string }>;
  t.equal(checks.find((c) => c.name === 'docker socket')?.status, 'ok', 'as gf-agent, doctor reaches Docker through the docker group');
  t.equal(checks.find((c) => c.name === 'free disk')?.detail.includes('/var/lib/gf-agent'), true, 'and measures the packaged state folder');

  const again = await inRoot(['dpkg', '-i', deb!]);
  t.equal(again.code, 0, `installing it again succeeds:\n${again.stderr}`);
  t.equal((await inRoot(['getent', 'passwd', 'gf-agent'])).stdout.trim().split(':')[2], user[2], 'the same user: the postinst is idempotent');

  // The installed command, as the gf-agent user, enrolled with a real control plane. Its folders
  // are under /tmp, which the root shares with this machine: Docker, outside the root, mounts
  // the job's folders by the same paths.
  const market = await Marketplace.start(t);
  const farm = 'agent-deb';
  const [uid, gid] = [Number(user[2]), Number(user[3])];
  const agent = await enrollAgent(market, {
    name: 'deb-agent',
    farm,
    payout: privateKeyToAddress(generatePrivateKey()),
    command: ['chroot', throwaway.dir, ...AS_AGENT_USER, 'env', '-u', 'NODE_OPTIONS', `PATH=${SYSTEM_PATH}`, '/usr/bin/gf-agent'],
    owner: { uid, gid },
  });
  agent.start();
  await market.waitForCapacity(farm, 1);
  const customer = await Customer.create(market, 1);
  const { created } = await customer.createFundedJob(busyboxSpec(market.images, 'echo from the deb; echo data > /output/data.txt'));
  const { lines, jobStatus } = await customer.tailLogs(created.job.id);
  t.equal(jobStatus, 'COMPLETED', 'the job ran to COMPLETED on the agent the .deb installed');
  t.same(linesOf(lines, 'stdout').map((l) => l.line), ['from the deb']);
  const job = await customer.getJob(created.job.id);
  t.equal(job.assignment?.farm.slug, farm);
  t.equal(job.result?.hashesMatch, true, 'its output uploaded with a matching hash');
});

t.test('default: dpkg --purge removes the files and the state folder', async (t) => {
  const purge = await inRoot(['dpkg', '--purge', 'gf-agent']);
  t.equal(purge.code, 0, `dpkg --purge succeeds:\n${purge.stderr}`);
  for (const path of ['/usr/bin/gf-agent', '/usr/lib/gf-agent', '/etc/gf-agent/agent.toml', '/var/lib/gf-agent']) {
    t.equal((await inRoot(['test', '-e', path])).code, 1, `${path} is gone`);
  }
});
