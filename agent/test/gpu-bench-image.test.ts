import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import { ensureGpuBenchImage, findGpuBenchDir, gpuBenchImageName, namesTaggedImage, readGpuBenchProgram } from '../src/benchmark/gpu-bench-image.js';
import { dockerGpuBenchmark } from '../src/benchmark/gpu-container.js';
import { demuxDockerOutput } from '../src/inventory/docker-output.js';
import { gfAgent } from './helpers/cli.js';
import { docker } from './helpers/docker.js';
import { fakeNvidiaSmi } from './helpers/fake-nvidia-smi.js';
import { buildGpuBenchRootfs } from './helpers/gpu-bench.js';
import { TestPeer } from './helpers/peer.js';

/**
 * The benchmark image as the agent makes it on a farm, from the gpu-bench program it carries,
 * with the real Docker Engine of this machine (which has no GPU, so a container of it can only
 * show that the program runs and says there is no driver). Each test makes its own repository
 * (`gpufarm-test/gpu-bench-…`) and removes it.
 */

t.setTimeout(900_000);

const work = mkdtempSync(join(tmpdir(), 'gpu-bench-image-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));
const rootfs = await buildGpuBenchRootfs(join(work, 'rootfs'));
const program = readGpuBenchProgram(rootfs);
/** What gf-agent from this checkout carries: the root scripts/build-images.sh laid out. */
const carried = readGpuBenchProgram(findGpuBenchDir());

/** A repository of this test's own, with its images removed when the test ends. */
function testRepository(t: Test): string {
  const repository = `gpufarm-test/gpu-bench-${randomBytes(4).toString('hex')}`;
  t.teardown(async () => {
    const images = await docker.listImages({ filters: { reference: [repository] } });
    for (const image of images) await docker.getImage(image.Id).remove({ force: true }).catch(() => undefined);
  });
  return repository;
}

/** Runs the image with `args` and no GPUs; its exit code and output. */
async function runImage(image: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const container = await docker.createContainer({ Image: image, Cmd: args, HostConfig: { NetworkMode: 'none', CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges'] } });
  try {
    await container.start();
    // Asked after the start: 'not-running' answers at once, with the exit code, for a container that
    // already exited. A 'next-exit' wait sent beside the start could reach dockerd after a fast exit
    // (no driver: exit 3 at once) and wait for a next exit that never comes.
    const waited = container.wait({ condition: 'not-running' }) as Promise<{ StatusCode: number }>;
    const { StatusCode } = await waited;
    return { code: StatusCode, ...demuxDockerOutput(await container.logs({ stdout: true, stderr: true })) };
  } finally {
    await container.remove({ force: true });
  }
}

t.test('behavior: the agent makes the image from its gpu-bench once: one layer, its entrypoint, named by the program\'s digest', async (t) => {
  const repository = testRepository(t);
  const first = await ensureGpuBenchImage(docker, { repository, program });
  t.equal(first.created, true, 'made when absent');
  t.equal(first.image, `${repository}:${program.digest.slice(0, 12)}`);
  t.equal(first.image, gpuBenchImageName(repository, program));
  const made = await docker.getImage(first.image).inspect();
  const again = await ensureGpuBenchImage(docker, { repository, program });
  t.same(again, { image: first.image, created: false }, 'found, not made again');
  t.equal((await docker.getImage(first.image).inspect()).Id, made.Id, 'the same image');
  t.same(made.Config.Entrypoint, ['/gpu-bench']);
  t.equal(made.Config.Labels?.['org.gpufarm.image'], 'gpu-bench');
  t.equal(made.RootFS.Layers?.length, 1, 'one layer and no base image, as FROM scratch');
  t.ok(made.Size < 10 * 1024 * 1024, `small: ${(made.Size / 1024 / 1024).toFixed(2)} MiB`);
  t.same(program.files.map((f) => f.path).filter((p) => !p.startsWith('lib')), ['gpu-bench'], 'the binary and libraries only');
});

t.test('behavior: in the image without GPUs the program runs and says there is no NVIDIA driver (exit 3)', async (t) => {
  const { image } = await ensureGpuBenchImage(docker, { repository: testRepository(t), program });
  const version = await runImage(image, ['--version']);
  t.equal(version.code, 0, version.stderr);
  t.match(version.stdout, /SASS for sm_75 sm_80 sm_86 sm_89 sm_90 sm_100 sm_120/);
  const bare = await runImage(image, []);
  t.equal(bare.code, 3, 'exit 3: no driver');
  t.match(bare.stderr, /^gpu-bench: no NVIDIA driver: libcuda\.so\.1 could not be loaded/);
  t.equal(bare.stdout, '');
  const selfTest = await runImage(image, ['--self-test']);
  t.equal(selfTest.code, 0, 'its self-test passes with the glibc in the image');
});

t.test('behavior: the benchmark runner makes the image on first use; Docker\'s refusal of GPUs it does not have is the error', async (t) => {
  const repository = testRepository(t);
  const runner = dockerGpuBenchmark(docker, { image: repository, programDir: rootfs, timeoutMs: 60_000 });
  await t.rejects(runner.run([{ index: 0, uuid: 'GPU-2c1e6a2f-63c4-9a2b-6f56-5c1de4c7c7a0' }]), /nvidia/, 'no NVIDIA runtime on this machine');
  await t.resolves(docker.getImage(gpuBenchImageName(repository, program)).inspect(), 'the image was made before the container was created');
  const theirs = dockerGpuBenchmark(docker, { image: `${repository}:operators-own`, programDir: rootfs });
  await t.rejects(theirs.run([{ index: 0, uuid: 'GPU-2c1e6a2f-63c4-9a2b-6f56-5c1de4c7c7a0' }]), /the benchmark image gpufarm-test\/gpu-bench-[0-9a-f]+:operators-own is not on this machine/, 'a tagged image is used as it is, never made');
});

t.test('behavior: a program folder that is not gpu-bench is refused', async (t) => {
  const empty = join(work, 'empty');
  mkdirSync(empty);
  t.throws(() => readGpuBenchProgram(empty), /has no gpu-bench binary/);
  const script = join(work, 'script');
  mkdirSync(script);
  writeFileSync(join(script, 'gpu-bench'), '#!/bin/sh\n', { mode: 0o755 });
  t.throws(() => readGpuBenchProgram(script), /is not an ELF binary/);
  t.equal(namesTaggedImage('gpufarm/gpu-bench'), false);
  t.equal(namesTaggedImage('127.0.0.1:5000/gpufarm/gpu-bench'), false, 'a registry port is not a tag');
  t.equal(namesTaggedImage('gpufarm/gpu-bench:1'), true);
  t.equal(namesTaggedImage('127.0.0.1:5000/gpufarm/gpu-bench@sha256:' + 'a'.repeat(64)), true);
});

t.test('behavior: gf-agent benchmark makes the image from its own program on its first run, and finds it on the next', async (t) => {
  const repository = testRepository(t);
  const smi = fakeNvidiaSmi('l4');
  t.teardown(smi.cleanup);
  const env = { PATH: smi.path, GF_AGENT_STATE_DIR: join(work, 'cli-state'), GF_AGENT_GPU_PROBE_IMAGE: 'gpufarm/test-no-such-probe-image:1', GF_AGENT_BENCHMARK_IMAGE: repository, GF_AGENT_KERNEL_LOG: '' };
  const first = await gfAgent(['benchmark', '--disk-mib', '8', '--sha-mib', '16'], env);
  t.equal(first.code, 0, first.stderr);
  const made = new RegExp(`benchmark image ${repository}:${carried.digest.slice(0, 12)}: made from (\\S+)`).exec(first.stderr);
  t.ok(made, 'made from the program it carries');
  if (!made) t.comment(first.stderr);
  // The repository's folder, or a link to it beside a bundled agent (shared/build/test-bundles.ts).
  t.equal(realpathSync(made?.[1] ?? '.'), realpathSync(carried.dir), 'the folder the agent found its gpu-bench in');
  const second = await gfAgent(['benchmark', '--disk-mib', '8', '--sha-mib', '16'], env);
  t.match(second.stderr, new RegExp(`benchmark image ${repository}:[0-9a-f]{12}: already on this machine`));
});

t.test('behavior: the daemon makes the image when it starts on a machine with real GPUs', async (t) => {
  const repository = testRepository(t);
  const token = `gfe_${'b'.repeat(43)}`;
  const peer = await TestPeer.start({ enrollmentTokens: [token], heartbeatIntervalSeconds: 1 });
  t.teardown(() => peer.close());
  const smi = fakeNvidiaSmi('l4');
  t.teardown(smi.cleanup);
  const env = { PATH: smi.path, GF_AGENT_STATE_DIR: join(work, 'daemon-state'), GF_AGENT_GPU_PROBE_IMAGE: 'gpufarm/test-no-such-probe-image:1', GF_AGENT_BENCHMARK_IMAGE: repository, GF_AGENT_KERNEL_LOG: '', GF_AGENT_METRICS_LISTEN: 'off' };
  t.equal((await gfAgent(['enroll', '--server', peer.url, '--token', token], env)).code, 0);
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GF_AGENT_')));
  const child = spawn(process.execPath, [fileURLToPath(new URL('../bin/gf-agent.js', import.meta.url)), 'run'], { env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  let output = '';
  const made = new Promise<void>((resolve) => {
    const seen = (d: Buffer) => {
      output += d.toString();
      if (/benchmark image .*: (made from|already on this machine)/.test(output)) resolve();
    };
    child.stdout.on('data', seen);
    child.stderr.on('data', seen);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  await Promise.race([made, exited]);
  t.match(output, new RegExp(`benchmark image ${repository}:${carried.digest.slice(0, 12)}: made from`), 'logged once made');
  await t.resolves(docker.getImage(gpuBenchImageName(repository, carried)).inspect());
  child.kill('SIGTERM');
  t.equal(await exited, 0);
});
