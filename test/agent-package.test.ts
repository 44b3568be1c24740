import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t, { type Test } from 'tap';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { agentConfigSchema, systemdUnit } from '@gpufarm/agent';
import { fakeNvidiaSmi } from '@gpufarm/agent/testing/fake-nvidia-smi';
import { installGlobally, outside, unpackTarball, workspaceImportsUnder } from '@gpufarm/client/testing/package';
import { enrollAgent } from './helpers/agent.js';
import { Customer, linesOf } from './helpers/customer.js';
import { busyboxSpec } from './helpers/jobs.js';
import { Marketplace, ROOT } from './helpers/marketplace.js';

/**
 * The agent as a farm operator installs it, both ways `scripts/build-agent-deb.sh` packages it
 * (built once here: two files building agent/dist at once would pull it from under each other).
 * The npm tarball: installed with `npm install -g` into a prefix of its own, run with plain node
 * and no NODE_OPTIONS (no tsx, no source condition), enrolled with a real control plane and given
 * a real job. The .deb: its fields and files, then a real `dpkg -i` in a throwaway root, a
 * copy-on-write view of a stock Debian 12 (debootstrap's minbase, made once per machine by
 * scripts/debian-root.sh: no nodejs, overlayfs over it, entered with chroot) with Docker's socket
 * and group as installing Docker leaves them: dpkg checks the dependencies against what that
 * system has and runs the maintainer scripts for real, and every write lands in the overlay. The
 * gf-agent it installed runs on the Node the package carries: it prints its version, passes
 * doctor as the gf-agent user, enrolls and runs a job; a purge removes it.
 */

// A pack, installs from the registry, two marketplaces and containers: minutes. 300 s ran out
// in two of three CI runs at deb2218 and bd96d5d (the install-and-run subtests took 131–151 s each).
t.setTimeout(600_000);

const run = promisify(execFile);
/** PATH inside the throwaway root: the system's, as a service or a login shell has it. */
const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** Runs the rest as the gf-agent user and its groups, as the service does; it execs, so a kill reaches gf-agent itself. */
const AS_AGENT_USER = ['setpriv', '--reuid=gf-agent', '--regid=gf-agent', '--init-groups', '--'];

/**
 * A copy-on-write view of a root file system (overlayfs: `lower` below, a folder of our own
 * above), with /proc, /dev, /tmp and the Docker socket of this machine mounted in.
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

  async mountAll(lower: string): Promise<void> {
    const [upper, workdir, dir] = ['upper', 'work', 'root'].map((name) => join(this.base, name)) as [string, string, string];
    for (const d of [upper, workdir, dir]) await mkdir(d, { recursive: true });
    await this.mount(['-t', 'overlay', 'overlay', '-o', `lowerdir=${lower},upperdir=${upper},workdir=${workdir}`, dir], dir);
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

const work = await mkdtemp(join(tmpdir(), 'gf-agent-package-'));
const version = (JSON.parse(await readFile(join(ROOT, 'agent/package.json'), 'utf8')) as { version: string }).version;
const built = await run('bash', [join(ROOT, 'scripts/build-agent-deb.sh'), '--out', join(work, 'out')], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 });
const [tarball, deb] = built.stdout.trim().split('\n');
const throwaway = ThrowawayRoot.in(work);
t.teardown(async () => {
  // Deleting a folder with this machine's /tmp or /dev still mounted in it would delete theirs.
  if (await throwaway.destroy()) await rm(work, { recursive: true, force: true });
  else console.error(`agent-package: mounts are left under ${work}; it was not deleted`);
});
// Made beside the suite by scripts/run-tests.sh; this call waits for that one or makes it.
const debianRoot = (await run('bash', [join(ROOT, 'scripts/debian-root.sh')])).stdout.trim();
await throwaway.mountAll(debianRoot);

/** Runs a command in the throwaway root with the system's PATH and no NODE_OPTIONS; never rejects. */
async function inRoot(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return run('chroot', [throwaway.dir, 'env', '-u', 'NODE_OPTIONS', `PATH=${SYSTEM_PATH}`, ...args], { maxBuffer: 16 * 1024 * 1024 }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (err: { code?: number; stdout?: string; stderr?: string }) => ({ code: err.code ?? 1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' }),
  );
}

/**
 * A control plane of its own (stopped when `t` ends), the installed gf-agent that `command`
 * starts enrolled with it, and a job with an output: it completes on that agent, streams its
 * line, and its output (packed and hashed by the worker file beside the command) matches.
 */
async function enrollAndRunJob(t: Test, agentOptions: { name: string; command: [string, ...string[]]; owner?: { uid: number; gid: number } }): Promise<void> {
  const market = await Marketplace.start(t);
  const farm = `farm-${agentOptions.name}`;
  const agent = await enrollAgent(market, { ...agentOptions, farm, payout: privateKeyToAddress(generatePrivateKey()) });
  agent.start();
  await market.waitForCapacity(farm, 1);
  const customer = await Customer.create(market, 1);
  const { created } = await customer.createFundedJob(busyboxSpec(market.images, `echo from ${agentOptions.name}; echo data > /output/data.txt`));
  const { lines, jobStatus } = await customer.tailLogs(created.job.id);
  t.equal(jobStatus, 'COMPLETED', `the job ran to COMPLETED on ${agentOptions.name}`);
  t.same(linesOf(lines, 'stdout').map((l) => l.line), [`from ${agentOptions.name}`], 'its stdout streamed through the link');
  const job = await customer.getJob(created.job.id);
  t.equal(job.assignment?.farm.slug, farm, "on that agent's farm");
  t.equal(job.result?.hashesMatch, true, 'the output hash matches the server re-hash');
  const download = await customer.download(job.result!.outputArtifactId!);
  t.equal(download.sha256, job.result!.serverHash, 'the output downloads with the recorded hash');
}

t.test('default: the packed agent installs with npm outside the repository; the installed gf-agent prints its version, passes doctor, enrolls and runs a job', async (t) => {
  const npmWork = join(work, 'npm');
  await mkdir(npmWork);
  const { paths, dir: pkgDir, manifest } = await unpackTarball(tarball!, npmWork);
  t.same(paths.filter((p) => !p.startsWith('dist/gpu-bench/')), ['README.md', 'dist/gf-agent.js', 'dist/pack-child.js', 'dist/pack-worker.js', 'package.json'], 'the compiled command, its packer worker and child, the manifest and the README');
  t.ok(paths.includes('dist/gpu-bench/gpu-bench'), 'and the GPU benchmark program');
  t.same(paths.filter((p) => p.startsWith('dist/gpu-bench/') && p !== 'dist/gpu-bench/gpu-bench' && !/^dist\/gpu-bench\/lib(64)?\/[^/]+\/?[^/]*\.so[.0-9]*$/.test(p)), [], 'with the libraries it loads, nothing else');
  t.same(Object.keys(manifest.dependencies ?? {}).sort(), ['dockerode', 'systeminformation'], 'npm installs dockerode and systeminformation, no @gpufarm/* package');
  t.equal(manifest.bin?.['gf-agent'], './dist/gf-agent.js', 'the gf-agent bin is the compiled entry');
  t.same(await workspaceImportsUnder(join(pkgDir, 'dist')), [], 'no import of a workspace package is left in dist/');
  t.match(await readFile(join(pkgDir, 'dist/gf-agent.js'), 'utf8'), /^#!\/usr\/bin\/env node\n/, 'gf-agent.js starts with its shebang');

  const prefix = await installGlobally(tarball!, npmWork);
  const installed = join(prefix, 'lib/node_modules/@gpufarm/agent');
  t.notOk(existsSync(join(installed, 'node_modules/tsx')) || existsSync(join(installed, 'node_modules/typescript')), 'neither tsx nor typescript is installed with it');
  const gfAgent = join(prefix, 'bin/gf-agent');
  const benchVersion = await outside(join(installed, 'dist/gpu-bench/gpu-bench'), ['--version'], npmWork);
  t.match(benchVersion.stdout, /^gpu-bench \d+\.\d+\.\d+ .*\n.*SASS for sm_75/, 'the installed gpu-bench runs');

  // The installed agent makes the benchmark image from the program beside it: no registry.
  const smi = fakeNvidiaSmi('l4');
  t.teardown(smi.cleanup);
  const repository = `gpufarm-test/gpu-bench-package-${process.pid}`;
  t.teardown(async () => {
    const ids = (await run('docker', ['images', '-q', repository])).stdout.split('\n').filter(Boolean);
    if (ids.length > 0) await run('docker', ['rmi', '-f', ...new Set(ids)]).catch(() => undefined);
  });
  const benchEnv = { PATH: `${smi.binDir}:${process.env.PATH ?? ''}`, GF_AGENT_STATE_DIR: join(npmWork, 'bench-state'), GF_AGENT_BENCHMARK_IMAGE: repository, GF_AGENT_GPU_PROBE_IMAGE: 'gpufarm/test-no-such-probe-image:1', GF_AGENT_KERNEL_LOG: '' };
  const bench = await outside(gfAgent, ['benchmark', '--disk-mib', '8', '--sha-mib', '16'], npmWork, benchEnv);
  t.match(bench.stderr, new RegExp(`benchmark image ${repository}:[0-9a-f]{12}: made from ${installed}/dist/gpu-bench/`), 'gf-agent benchmark made the image from its own package');

  const versionOut = await outside(gfAgent, ['--version'], npmWork);
  t.equal(versionOut.stdout.trim(), version, 'gf-agent --version prints the package version');

  const doctorEnv = { GF_AGENT_STATE_DIR: join(npmWork, 'doctor-state'), GF_AGENT_SIMULATE_GPUS: '1x rtx-4090-24gb', GF_AGENT_MIN_FREE_DISK_BYTES: '0' };
  const doctor = await outside(gfAgent, ['doctor', '--json'], npmWork, doctorEnv);
  const checks = JSON.parse(doctor.stdout) as Array<{ name: string; status: string }>;
  t.equal(checks.find((c) => c.name === 'docker socket')?.status, 'ok', 'doctor reached Docker through the installed dockerode');
  t.same(checks.filter((c) => c.status === 'fail'), [], 'doctor exits 0 with no failed check');

  await enrollAndRunJob(t, { name: 'npm-agent', command: ['env', '-u', 'NODE_OPTIONS', gfAgent] });
});

t.test('default: the .deb is built from the npm tarball with its fields, the app under /usr/lib/gf-agent, the command, the unit and the conffile', async (t) => {
  t.ok(tarball && existsSync(tarball), `the script wrote the npm tarball beside it (${tarball})`);
  const arch = (await run('dpkg', ['--print-architecture'])).stdout.trim();
  t.equal(deb, join(work, 'out', `gf-agent_${version}_${arch}.deb`), 'named gf-agent_<version>_<architecture>.deb');
  const field = async (name: string) => (await run('dpkg-deb', ['-f', deb!, name])).stdout.trim();
  t.equal(await field('Package'), 'gf-agent');
  t.equal(await field('Version'), version, 'the version of agent/package.json');
  t.equal(await field('Architecture'), arch, "gpu-bench is compiled code: this machine's architecture");
  t.equal(await field('Depends'), 'libc6 (>= 2.28), libstdc++6, adduser', "no nodejs: only what the Node it carries links to, adduser for the postinst");
  t.match(await field('Recommends'), /docker\.io/, 'Docker recommended');

  const fsys = async (path: string) => (await run('sh', ['-c', 'dpkg-deb --fsys-tarfile "$1" | tar -xOf - "$2"', 'sh', deb!, path])).stdout;
  const listing = (await run('dpkg-deb', ['-c', deb!], { maxBuffer: 64 * 1024 * 1024 })).stdout.split('\n');
  const paths = listing.map((line) => line.split(/\s+/).slice(5).join(' ')).filter(Boolean);
  for (const path of ['./usr/lib/gf-agent/dist/gf-agent.js', './usr/lib/gf-agent/dist/pack-worker.js', './usr/lib/gf-agent/dist/pack-child.js', './usr/lib/gf-agent/dist/gpu-bench/gpu-bench', './usr/lib/gf-agent/package.json', './usr/lib/gf-agent/README.md', './usr/lib/gf-agent/node_modules/dockerode/package.json', './usr/lib/gf-agent/node_modules/systeminformation/package.json', './usr/lib/gf-agent/node/bin/node', './usr/lib/gf-agent/node/LICENSE', './usr/lib/systemd/system/gf-agent.service', './etc/gf-agent/agent.toml', './usr/share/doc/gf-agent/README.md', './usr/share/doc/gf-agent/install.md', './usr/share/doc/gf-agent/configuration.md']) {
    t.ok(paths.includes(path), `${path} is in the package`);
  }
  t.ok(paths.includes('./usr/bin/gf-agent'), '/usr/bin/gf-agent is in the package');
  t.equal(await fsys('./usr/bin/gf-agent'), '#!/bin/sh\nexec /usr/lib/gf-agent/node/bin/node /usr/lib/gf-agent/dist/gf-agent.js "$@"\n', "/usr/bin/gf-agent runs the compiled command on the package's own Node");
  t.same(paths.filter((p) => p.startsWith('./usr/lib/gf-agent/node_modules/@gpufarm/') || /\/node_modules\/(tsx|typescript)\//.test(p)), [], 'no workspace package, no tsx, no typescript');
  t.same(paths.filter((p) => p.endsWith('.node')), [], 'no native addon');
  t.same(listing.filter((l) => l && !l.includes(' root/root ')), [], 'every file is owned by root');

  const conffiles = (await run('dpkg-deb', ['-I', deb!, 'conffiles'])).stdout;
  t.equal(conffiles, '/etc/gf-agent/agent.toml\n', 'agent.toml is a conffile: an upgrade keeps local edits');
  const unit = await fsys('./usr/lib/systemd/system/gf-agent.service');
  t.equal(
    unit,
    systemdUnit({ execStart: '/usr/bin/gf-agent run', configPath: null, stateDir: '/var/lib/gf-agent', user: 'gf-agent', documentation: 'file:///usr/share/doc/gf-agent/README.md' }),
    'the unit is the text gf-agent install-service writes, for the gf-agent user, pointing at the installed operator guide',
  );
  const toml = await fsys('./etc/gf-agent/agent.toml');
  const listed = [...toml.matchAll(/^# ([a-z_]+) = /gm)].map((m) => m[1]).sort();
  const known = Object.keys(agentConfigSchema.shape).map((k) => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)).sort();
  t.same(listed, known, 'agent.toml lists every setting the agent reads, and no other');
  t.notMatch(toml, /^[a-z_]+ = /m, 'all of them commented: the defaults apply');
});

t.test('default: dpkg -i installs it in a stock Debian 12 without nodejs: the user, the state folder, the conffile; gf-agent --version and doctor run on its own Node, and so does a job', async (t) => {
  t.match((await inRoot(['cat', '/etc/debian_version'])).stdout, /^12\./, 'the root is Debian 12');
  t.not((await inRoot(['sh', '-c', 'command -v node || command -v nodejs'])).code, 0, 'with no node on its PATH');
  t.not((await inRoot(['dpkg-query', '-W', 'nodejs'])).code, 0, 'and no nodejs package');
  // What installing Docker leaves: its group, owning the socket (mounted from this machine).
  const dockerGid = (await stat('/run/docker.sock')).gid;
  t.equal((await inRoot(['groupadd', '--system', '--gid', String(dockerGid), 'docker'])).code, 0, "the docker group, with the socket's gid");

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
  t.equal((await inRoot(['/usr/lib/gf-agent/node/bin/node', '--version'])).stdout.trim(), 'v24.21.0', 'the Node it carries is 24');
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
  await enrollAndRunJob(t, {
    name: 'deb-agent',
    command: ['chroot', throwaway.dir, ...AS_AGENT_USER, 'env', '-u', 'NODE_OPTIONS', `PATH=${SYSTEM_PATH}`, '/usr/bin/gf-agent'],
    owner: { uid: Number(user[2]), gid: Number(user[3]) },
  });
});

t.test('default: dpkg --purge removes the files and the state folder', async (t) => {
  const purge = await inRoot(['dpkg', '--purge', 'gf-agent']);
  t.equal(purge.code, 0, `dpkg --purge succeeds:\n${purge.stderr}`);
  for (const path of ['/usr/bin/gf-agent', '/usr/lib/gf-agent', '/etc/gf-agent/agent.toml', '/var/lib/gf-agent']) {
    t.equal((await inRoot(['test', '-e', path])).code, 1, `${path} is gone`);
  }
});
