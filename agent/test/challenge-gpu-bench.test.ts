import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkOpenings, solveChain } from '@gpufarm/shared/node';
import t, { type Test } from 'tap';
import type { ChallengeCommitment, ChallengeOpening, ChallengeSpec, GpuChallenge } from '../src/challenge/challenge.js';
import { challengeContainerOptions, dockerChallenges } from '../src/challenge/container-challenge.js';
import { gpuBenchChallenge } from '../src/challenge/gpu-bench-challenge.js';
import { gpuBenchChallengeArgs, spawnGpuBench } from '../src/challenge/gpu-bench-session.js';
import { LABEL_CHALLENGE } from '../src/docker/labels.js';
import { docker } from './helpers/docker.js';
import { buildFakeLibcuda, buildGpuBenchRootfs } from './helpers/gpu-bench.js';

/**
 * The GPU challenge on real GPUs as the daemon runs it: gpu-bench --challenge on the tests' fake
 * driver (the kernels replayed on the CPU), as a local process and in its container on this
 * machine's Docker Engine (the fake libcuda.so.1 mounted where the NVIDIA toolkit mounts the
 * driver's), its commitment and openings held to the server's check.
 */

t.setTimeout(900_000);

const work = mkdtempSync(join(tmpdir(), 'challenge-gpu-bench-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));
const rootfs = await buildGpuBenchRootfs(join(work, 'rootfs'));
const fakeDir = await buildFakeLibcuda(work);

const UUIDS = ['GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf', 'GPU-b0b1b2b3-b4b5-b6b7-b8b9-babbbcbdbebf'];
const PRE = '11'.repeat(32);
const GO = '22'.repeat(32);
const spec = (gpus = 1, over: Partial<ChallengeSpec> = {}): ChallengeSpec => ({
  challengeId: `chl_${randomBytes(4).toString('hex')}`,
  gpus: UUIDS.slice(0, gpus).map((uuid, index) => ({ index, uuid })),
  m: 256, n: 256, k: 256, rounds: 3, preSeed: PRE, simulated: false,
  ...over,
});

/** gpu-bench as a local process on the fake driver. */
const local = (s: ChallengeSpec, env: Record<string, string> = {}) =>
  gpuBenchChallenge(s, async (args) => spawnGpuBench([join(rootfs, 'gpu-bench')], args, { env: { ...process.env, LD_LIBRARY_PATH: fakeDir, FAKE_CUDA_DEVICES: '2', ...env } }));

const hashes = (hex: string) => Array.from({ length: hex.length / 64 }, (_, i) => Buffer.from(hex.slice(i * 64, i * 64 + 64), 'hex'));
function serverCheck(s: ChallengeSpec, commit: ChallengeCommitment[], openings: ChallengeOpening[], uuid: string): string | null {
  return checkOpenings({
    preSeed: Buffer.from(s.preSeed, 'hex'), goSeed: Buffer.from(GO, 'hex'), gpu: uuid, m: s.m, n: s.n, k: s.k,
    roots: hashes(commit.find((c) => c.uuid === uuid)!.roots),
    openings: openings.filter((o) => o.uuid === uuid).map((o) => ({ round: o.round, row: o.row, path: hashes(o.path) })),
  });
}

/** Runs a whole challenge: prepare, go, open two rows per GPU; the server's check of each GPU. */
async function honest(t: Test, challenge: GpuChallenge, s: ChallengeSpec): Promise<void> {
  await challenge.prepare();
  const commit = await challenge.go(GO);
  t.same(commit.map((c) => c.uuid).sort(), s.gpus.map((g) => g.uuid).sort(), 'a commitment per GPU');
  for (const c of commit) {
    const cpu = solveChain({ preSeed: Buffer.from(PRE, 'hex'), goSeed: Buffer.from(GO, 'hex'), gpu: c.uuid, m: s.m, n: s.n, k: s.k, rounds: s.rounds });
    t.equal(c.roots, Buffer.concat(cpu.roots).toString('hex'), `${c.uuid}: the roots are the CPU's`);
  }
  const rows = s.gpus.flatMap((g) => [{ uuid: g.uuid, round: 2, row: 200 }, { uuid: g.uuid, round: 0, row: 7 }]);
  const openings = await challenge.open(rows);
  t.same(openings.map((o) => [o.uuid, o.round, o.row]), rows.map((r) => [r.uuid, r.round, r.row]), 'in the order asked');
  for (const g of s.gpus) t.equal(serverCheck(s, commit, openings, g.uuid), null, `${g.uuid}: the server's check passes`);
}

/** This test's containers of a challenge (by its label), running or not. */
const containersOf = (challengeId: string) => docker.listContainers({ all: true, filters: { label: [`${LABEL_CHALLENGE}=${challengeId}`] } });

t.test('default: gpu-bench on two GPUs commits to their chains and opens rows the server\'s check accepts', async (t) => {
  const s = spec(2);
  await honest(t, local(s), s);
});

t.test('error: challenge_failed with the driver\'s one line when gpu-bench fails, sees other GPUs, or is asked for rows it has not', async (t) => {
  const noGpu = local(spec(), { FAKE_CUDA_INIT_ERROR: '100' });
  await t.rejects(noGpu.prepare(), { code: 'challenge_failed', message: /^gpu-bench exited with 5 before its ready line: no NVIDIA GPU is visible to the driver/ });
  const missing = local(spec(), { FAKE_CUDA_DEVICES: '1', FAKE_CUDA_UUIDS: 'GPU-c0c1c2c3-c4c5-c6c7-c8c9-cacbcccdcecf' });
  await t.rejects(missing.prepare(), { code: 'challenge_failed', message: /^gpu-bench exited with 5 before its ready line: GPU GPU-a0a1a2a3-\S+ is not visible; the driver sees 1/ });
  const s = spec();
  const bad = local(s);
  await bad.prepare();
  await bad.go(GO);
  await t.rejects(bad.open([{ uuid: UUIDS[0]!, round: 3, row: 0 }]), { code: 'challenge_failed', message: /^cannot open GPU-a0a1a2a3-\S+ round 3 row 0: the challenge has 3 rounds of 256 rows/ });
  const gone = local(spec(), {});
  await gone.prepare();
  await gone.cancel();
  await t.rejects(gone.go(GO), { code: 'challenge_cancelled' }, 'a cancelled challenge runs nothing more');
});

t.test('args: the container holds exactly the challenge\'s GPUs by UUID, stdin open once, no network, labelled as the agent\'s', async (t) => {
  const s = spec(2, { challengeId: 'chl_args' });
  const options = challengeContainerOptions({ image: 'img', owner: 'm_1', spec: s, args: gpuBenchChallengeArgs(s) });
  t.match(options, {
    name: 'gf-m_1-chl_args',
    Image: 'img',
    Labels: { 'org.gpufarm.managed': 'true', 'org.gpufarm.owner': 'm_1', [LABEL_CHALLENGE]: 'chl_args' },
    OpenStdin: true, StdinOnce: true, AttachStdin: true, Tty: false,
    HostConfig: { NetworkMode: 'none', CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges'], DeviceRequests: [{ Driver: 'nvidia', DeviceIDs: UUIDS, Capabilities: [['gpu', 'compute', 'utility']] }] },
  });
  t.same(options.Cmd, ['--challenge', '--json-only', '--gpus', UUIDS.join(','), '--m', '256', '--n', '256', '--k', '256', '--rounds', '3', '--pre-seed', PRE]);
  t.equal(options.HostConfig?.Binds, undefined, 'nothing of the host mounted');
  const fake = challengeContainerOptions({ image: 'img', owner: 'm_1', spec: s, args: [], driverLibrary: '/x/libcuda.so.1' });
  t.same(fake.HostConfig?.Binds, ['/x/libcuda.so.1:/usr/local/nvidia/lib64/libcuda.so.1:ro'], 'a fake driver mounted instead of GPUs');
  t.equal(fake.HostConfig?.DeviceRequests, undefined);
});

t.test('behavior: in its container on Docker, the challenge runs through the same driver and the container is removed at the end and on cancel', async (t) => {
  const repository = `gpufarm-test/gpu-bench-${randomBytes(4).toString('hex')}`;
  t.teardown(async () => {
    for (const image of await docker.listImages({ filters: { reference: [repository] } })) await docker.getImage(image.Id).remove({ force: true }).catch(() => undefined);
  });
  const start = dockerChallenges({ docker, image: repository, owner: `t-${randomBytes(4).toString('hex')}`, programDir: rootfs, driverLibrary: join(fakeDir, 'libcuda.so.1') });
  const s = spec();
  await honest(t, start(s), s);
  t.same(await containersOf(s.challengeId), [], 'removed once the openings are read');

  const held = spec();
  const cancelled = start(held);
  await cancelled.prepare();
  t.equal((await containersOf(held.challengeId))[0]?.State, 'running', 'ready: the program waits for the go');
  await cancelled.cancel();
  t.same(await containersOf(held.challengeId), [], 'removed on cancel');
  await t.rejects(cancelled.go(GO), { code: 'challenge_cancelled' });
});

t.test('error: without the NVIDIA runtime, Docker\'s refusal of the GPUs is the reason, and no container is left', async (t) => {
  const repository = `gpufarm-test/gpu-bench-${randomBytes(4).toString('hex')}`;
  t.teardown(async () => {
    for (const image of await docker.listImages({ filters: { reference: [repository] } })) await docker.getImage(image.Id).remove({ force: true }).catch(() => undefined);
  });
  const s = spec();
  const challenge = dockerChallenges({ docker, image: repository, owner: `t-${randomBytes(4).toString('hex')}`, programDir: rootfs })(s);
  await t.rejects(challenge.prepare(), { code: 'challenge_failed', message: /^the challenge container could not be started: .*nvidia/ });
  t.same(await containersOf(s.challengeId), [], 'the container that could not start was removed');
});
