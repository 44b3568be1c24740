import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkOpenings, solveChain } from '@gpufarm/shared/node';
import t from 'tap';
import { gpuBenchLineSchema } from '../src/benchmark/gpu-container.js';
import type { ChallengeCommitment, ChallengeOpening, ChallengeRow } from '../src/challenge/challenge.js';
import { GpuBenchError, GpuBenchSession, spawnGpuBench } from '../src/challenge/gpu-bench-session.js';
import { buildFakeLibcuda, buildGpuBenchRootfs, fatbinEntries, runProgram } from './helpers/gpu-bench.js';

/**
 * gpu-bench (agent/gpu-bench) as built here with nvcc, run on this machine, which has no GPU:
 * its arguments, its GPU code for each architecture, what it says with no driver, and, through
 * the tests' fake libcuda.so.1 (found by its real dlopen on LD_LIBRARY_PATH; the kernels are
 * replayed on the CPU), its refusals and the JSON lines the agent's parser reads.
 */

// The first build compiles the GPU code for seven architectures: minutes on two busy cores.
t.setTimeout(900_000);

const work = mkdtempSync(join(tmpdir(), 'gpu-bench-test-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));
const rootfs = await buildGpuBenchRootfs(join(work, 'rootfs'));
const bin = join(rootfs, 'gpu-bench');
const fakeDir = await buildFakeLibcuda(work);
/** Small sizes: the fake driver multiplies on the CPU. */
const SMALL = ['--matmul-size', '256', '--seconds', '0.05', '--copy-mib', '64', '--transfer-mib', '16'];
const onFake = (args: string[], env: Record<string, string> = {}) => runProgram(bin, [...SMALL, ...args], { LD_LIBRARY_PATH: fakeDir, ...env });
const linesOf = (stdout: string) => stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => gpuBenchLineSchema.parse(JSON.parse(l)));

t.test('default: --help and --version say what it measures, the architectures and the oldest driver', async (t) => {
  const help = await runProgram(bin, ['--help']);
  t.equal(help.code, 0);
  for (const flag of ['--gpus', '--matmul-size', '--seconds', '--copy-mib', '--transfer-mib', '--json-only', '--self-test', '--version']) t.match(help.stdout, flag);
  t.match(help.stdout, /FP16 and BF16 tensor-core matmul/);
  const version = await runProgram(bin, ['--version']);
  t.equal(version.code, 0);
  t.match(version.stdout, /^gpu-bench 1\.0\.0 \(build [0-9a-f]{16}\)/);
  t.match(version.stdout, 'SASS for sm_75 sm_80 sm_86 sm_89 sm_90 sm_100 sm_120; PTX for compute_100');
  t.match(version.stdout, /drivers with CUDA 13\.0 or newer load that code: the R580 branch or newer \(580\.65\.06 at least\); older drivers JIT-compile the compatibility PTX for compute_75 and compute_80 \(ISA 7\.0\)/);
  t.match(version.stdout, /needs an NVIDIA driver with CUDA 11\.0 or newer: the R450 branch or newer/);
});

t.test('behavior: the binary carries SASS for every architecture from 7.5 and PTX for later GPUs (what cuobjdump --list-elf / --list-ptx list)', async (t) => {
  const entries = fatbinEntries(bin);
  t.same(entries.filter((e) => e.kind === 'sass').map((e) => e.arch).sort((a, b) => a - b), [75, 80, 86, 89, 90, 100, 120]);
  t.same(entries.filter((e) => e.kind === 'ptx').map((e) => e.arch), [100]);
  const text = readFileSync(bin, 'latin1');
  for (const arch of [75, 80]) {
    t.match(text, `\n.version 7.0\n.target sm_${arch}\n`, `the compatibility PTX for compute_${arch} declares ISA 7.0`);
  }
});

t.test('behavior: bad arguments exit 2 with a message naming the argument', async (t) => {
  const cases: Array<[string[], RegExp]> = [
    [['--matmul-size', '1000'], /--matmul-size must be a multiple of 256, not 1000/],
    [['--matmul-size', '12x'], /--matmul-size must be a whole number from 256 to 32768, not "12x"/],
    [['--seconds', '0'], /--seconds must be a number of seconds from 0\.05 to 60, not "0"/],
    [['--gpus', 'first'], /--gpus takes GPU indexes or UUIDs .* not "first"/],
    [['--gpus', '0,'], /--gpus takes GPU indexes or UUIDs .* not ""/],
    [['--copy-mib'], /--copy-mib needs a value/],
    [['--transfer-mib', '8'], /--transfer-mib must be a whole number from 16 to 16384, not "8"/],
    [['--fast'], /unknown argument "--fast"/],
  ];
  for (const [args, message] of cases) {
    const res = await runProgram(bin, args);
    t.equal(res.code, 2, `${args.join(' ')}: exit 2`);
    t.match(res.stderr, message, `${args.join(' ')}: says why`);
    t.match(res.stderr, /usage: gpu-bench/);
    t.equal(res.stdout, '', 'nothing on stdout');
  }
});

t.test('behavior: --self-test replays the kernel\'s tiling and the result check on the CPU', async (t) => {
  const res = await runProgram(bin, ['--self-test']);
  t.equal(res.code, 0, res.stderr);
  t.match(res.stdout, /self-test passed/);
});

t.test('behavior: with no NVIDIA driver it exits 3 and says how to get one', async (t) => {
  const res = await runProgram(bin, [], { GPU_BENCH_LIBCUDA: join(work, 'no-such-dir/libcuda.so.1') });
  t.equal(res.code, 3);
  t.match(res.stderr, /^gpu-bench: no NVIDIA driver: libcuda\.so\.1 could not be loaded \(.*cannot open shared object file/);
  t.match(res.stderr, /docker run --gpus all, with the NVIDIA Container Toolkit/);
  t.equal(res.stdout, '');
});

t.test('behavior: a driver of the toolkit\'s family loads the fatbin; R535 to R570 JIT-compile the compatibility PTX of their GPU\'s generation', async (t) => {
  const loadedFile = join(work, 'loaded.txt');
  const loaded = () => {
    const lines = readFileSync(loadedFile, 'utf8').trim().split('\n');
    rmSync(loadedFile);
    return lines;
  };
  const r580 = await onFake([], { FAKE_CUDA_DRIVER_VERSION: '13000', FAKE_CUDA_CC: '9.0', FAKE_CUDA_LOADED: loadedFile });
  t.equal(r580.code, 0, r580.stderr);
  t.same(loaded(), ['fatbin']);
  t.equal(linesOf(r580.stdout)[0]?.gpuCode, 'fatbin');
  t.notMatch(r580.stderr, /JIT-compiling/);
  // R535 (CUDA 12.2) on Hopper, R570 (CUDA 12.8) on Blackwell, R470 (CUDA 11.4) on Ampere; Turing on R535.
  const cases: Array<[string, string, string]> = [
    ['12020', '9.0', 'compute_80'],
    ['12080', '12.0', 'compute_80'],
    ['11040', '8.6', 'compute_80'],
    ['12020', '7.5', 'compute_75'],
  ];
  for (const [driver, cc, arch] of cases) {
    const res = await onFake([], { FAKE_CUDA_DRIVER_VERSION: driver, FAKE_CUDA_CC: cc, FAKE_CUDA_LOADED: loadedFile });
    t.equal(res.code, 0, `driver ${driver}, compute capability ${cc}: ${res.stderr}`);
    t.same(loaded(), [`ptx sm_${arch.slice(-2)} isa 7.0`], `driver ${driver}, ${cc}: the driver JIT-compiles ${arch}`);
    const [line] = linesOf(res.stdout);
    t.equal(line?.gpuCode, `compat-ptx-${arch}`);
    t.equal(line?.computeCapability, cc);
    t.match(res.stderr, new RegExp(`GPU 0: the driver \\(CUDA ${Number(driver.slice(0, 2))}\\.${Number(driver.slice(3, 4))}\\) predates the CUDA 13\\.0 toolkit's code; JIT-compiling the compatibility PTX for ${arch} \\(ISA 7\\.0\\)`));
  }
});

t.test('behavior: a driver too old for the compatibility PTX, or one without its JIT compiler, is refused with exit 4 and the way out', async (t) => {
  const old = await onFake([], { FAKE_CUDA_DRIVER_VERSION: '10020' });
  t.equal(old.code, 4);
  t.match(old.stderr, /the NVIDIA driver is too old: it supports CUDA 10\.2, and this gpu-bench needs CUDA 11\.0 or newer: the R450 branch or newer \(450\.36\.06 at least\), whose JIT compiler/);
  t.match(old.stderr, /compatibility PTX \(ISA 7\.0\)\. Upgrade the driver/);
  t.equal(old.stdout, '');
  const noJit = await onFake([], { FAKE_CUDA_DRIVER_VERSION: '12020', FAKE_CUDA_NO_JIT: '1' });
  t.equal(noJit.code, 4);
  t.match(noJit.stderr, /the driver \(CUDA 12\.2\) needs its JIT compiler for this gpu-bench's compute_80 PTX and has none \(CUDA_ERROR_JIT_COMPILER_NOT_FOUND \(221\): PTX JIT compiler library not found\)/);
  t.match(noJit.stderr, /libnvidia-ptxjitcompiler\.so\.1/);
  t.equal(noJit.stdout, '');
});

t.test('behavior: a user-space driver that does not match the kernel module exits 4; no GPU exits 5', async (t) => {
  const mismatch = await onFake([], { FAKE_CUDA_INIT_ERROR: '803' });
  t.equal(mismatch.code, 4);
  t.match(mismatch.stderr, /CUDA_ERROR_SYSTEM_DRIVER_MISMATCH .* does not match the kernel module/);
  const none = await onFake([], { FAKE_CUDA_INIT_ERROR: '100' });
  t.equal(none.code, 5);
  t.match(none.stderr, /no NVIDIA GPU is visible to the driver \(CUDA_ERROR_NO_DEVICE/);
  const zero = await onFake([], { FAKE_CUDA_DEVICES: '0' });
  t.equal(zero.code, 5);
  t.match(zero.stderr, /sees no GPU/);
});

t.test('default: one JSON line per GPU, checked and in the contract the agent parses', async (t) => {
  const res = await onFake([], { FAKE_CUDA_DEVICES: '2', FAKE_CUDA_CC: '8.6' });
  t.equal(res.code, 0, res.stderr);
  const lines = linesOf(res.stdout);
  t.same(lines.map((l) => [l.index, l.uuid]), [
    [0, 'GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf'],
    [1, 'GPU-b0b1b2b3-b4b5-b6b7-b8b9-babbbcbdbebf'],
  ], 'each GPU by its UUID, formatted as nvidia-smi prints it');
  for (const l of lines) {
    t.equal(l.computeCapability, '8.6');
    t.equal(l.driverCudaVersion, '13.0');
    t.equal(l.program, 'gpu-bench 1.0.0');
    t.equal(l.matmulSize, 256);
    t.equal(l.matmulGflops, l.fp16MatmulGflops, 'matmulGflops is the FP16 figure');
    t.ok(l.fp16MatmulGflops > 0 && l.bf16MatmulGflops! > 0 && l.fp32Gflops > 0, 'matmul and FP32 figures');
    t.ok(l.memoryBandwidthMbps > 0 && l.hostToDeviceMbps > 0 && l.deviceToHostMbps > 0, 'bandwidth figures');
  }
  t.equal(res.stdout.split('\n').filter(Boolean).length, 2, 'stdout holds the JSON lines only');
  t.match(res.stderr, /GPU 0: fp16 matmul checked against the CPU \(3 stages of shared memory\)/, 'progress on stderr');
  const quiet = await onFake(['--json-only']);
  t.equal(quiet.code, 0);
  t.equal(quiet.stderr, '', '--json-only: nothing on stderr');
  t.equal(linesOf(quiet.stdout).length, 1);
});

t.test('behavior: a wrong matmul result is refused: exit 1, no figure for that GPU', async (t) => {
  for (const dtype of ['fp16', 'bf16']) {
    const res = await onFake([], { FAKE_CUDA_CORRUPT: dtype });
    t.equal(res.code, 1, `${dtype} corrupted: exit 1`);
    t.equal(res.stdout, '', 'no JSON line');
    t.match(res.stderr, new RegExp(`the ${dtype} matmul \\(256x512x512\\) computed a wrong result on this GPU: 1 of 131072 checked elements differ, the first C\\[255\\]\\[511\\] = 1000 .*no figure is reported`));
  }
});

t.test('behavior: GPUs chosen by index or UUID; one that is not there exits 5 listing those that are', async (t) => {
  const env = { FAKE_CUDA_DEVICES: '2' };
  const byIndex = await onFake(['--gpus', '1', '--json-only'], env);
  t.equal(byIndex.code, 0, byIndex.stderr);
  t.same(linesOf(byIndex.stdout).map((l) => l.index), [1]);
  const byUuid = await onFake(['--gpus', 'GPU-A0A1A2A3-A4A5-A6A7-A8A9-AAABACADAEAF', '--json-only'], env);
  t.same(linesOf(byUuid.stdout).map((l) => l.uuid), ['GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf'], 'UUIDs in any case');
  const missing = await onFake(['--gpus', '0,2'], env);
  t.equal(missing.code, 5);
  t.match(missing.stderr, /GPU 2 is not visible; the driver sees 2: 0 GPU-a0a1a2a3-.*, 1 GPU-b0b1b2b3-/);
  t.equal(missing.stdout, '', 'nothing measured when the list is wrong');
});

t.test('behavior: each generation loads its code: Turing without bf16, Blackwell and Thor by SASS or PTX, Volta refused', async (t) => {
  const turing = await onFake([], { FAKE_CUDA_CC: '7.5' });
  t.equal(turing.code, 0, turing.stderr);
  const [line] = linesOf(turing.stdout);
  t.equal(line?.bf16MatmulGflops, null, 'bf16MatmulGflops is null below 8.0');
  t.match(turing.stderr, /no bf16 tensor cores before compute capability 8\.0/);
  t.match(turing.stderr, /2 stages of shared memory/);
  for (const cc of ['10.3', '11.0', '12.1']) {
    const res = await onFake(['--json-only'], { FAKE_CUDA_CC: cc });
    t.equal(res.code, 0, `compute capability ${cc} finds code in the fatbin: ${res.stderr}`);
  }
  const volta = await onFake([], { FAKE_CUDA_CC: '7.0' });
  t.equal(volta.code, 1);
  t.match(volta.stderr, /compute capability 7\.0 is older than 7\.5, the oldest that CUDA 13 builds for: not measured/);
});

/**
 * gpu-bench --challenge on the fake driver through the agent's driver of its protocol
 * (`GpuBenchSession`): ready, go, commit, open. Returns each line it read, the program's exit
 * code and stderr; a step the program refused ends the run with the code and stderr it left.
 */
async function runChallenge(args: string[], goSeed: string, rows: (commit: ChallengeCommitment[]) => ChallengeRow[], env: Record<string, string> = {}) {
  const session = new GpuBenchSession(spawnGpuBench([bin], ['--challenge', ...args], { env: { ...process.env, LD_LIBRARY_PATH: fakeDir, ...env } }));
  try {
    const ready = await session.ready();
    const commit = await session.go(goSeed);
    const openings = await session.open(rows(commit));
    return { ready, commit, openings, code: (await session.exited).code, stderr: session.stderr };
  } catch (err) {
    if (!(err instanceof GpuBenchError)) throw err;
    return { ready: null, commit: [], openings: [], code: err.exitCode, stderr: err.stderr, error: err.message };
  }
}

const PRE = Buffer.alloc(32, 0x11);
const GO = Buffer.alloc(32, 0x22);
const CHALLENGE = ['--m', '256', '--n', '256', '--k', '256', '--rounds', '3', '--pre-seed', PRE.toString('hex')];
const rootsOf = (hex: string) => Array.from({ length: hex.length / 64 }, (_, i) => Buffer.from(hex.slice(i * 64, i * 64 + 64), 'hex'));
const openingsOf = (openings: ChallengeOpening[], uuid: string) =>
  openings.filter((x) => x.uuid === uuid).map((x) => ({ round: x.round, row: x.row, path: rootsOf(x.path) }));
const rowsOf = (text: string): ChallengeRow[] => text.split(' ').map((item) => {
  const [uuid, round, row] = item.split(':');
  return { uuid: uuid!, round: Number(round), row: Number(row) };
});

t.test('default: --challenge commits to each GPU\'s chain and opens rows that the server\'s check accepts', async (t) => {
  const uuids = ['GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf', 'GPU-b0b1b2b3-b4b5-b6b7-b8b9-babbbcbdbebf'];
  const res = await runChallenge(CHALLENGE, GO.toString('hex'), () => rowsOf(`${uuids[1]}:2:17 ${uuids[0]}:0:3 ${uuids[1]}:2:200 ${uuids[0]}:1:255`), { FAKE_CUDA_DEVICES: '2' });
  t.equal(res.code, 0, res.stderr);
  t.same(res.ready, { ready: true, program: 'gpu-bench 1.0.0', gpus: [{ uuid: uuids[0], index: 0 }, { uuid: uuids[1], index: 1 }] });
  for (const uuid of uuids) {
    const entry = res.commit.find((c) => c.uuid === uuid)!;
    const expected = solveChain({ preSeed: PRE, goSeed: GO, gpu: uuid, m: 256, n: 256, k: 256, rounds: 3 });
    t.same(rootsOf(entry.roots).map((r) => r.toString('hex')), expected.roots.map((r) => r.toString('hex')), `${uuid}: the chain's roots are the CPU's`);
    t.ok(entry.gpuSeconds > 0, 'GPU time');
    const opened = openingsOf(res.openings, uuid);
    t.equal(opened.length, 2);
    t.equal(checkOpenings({ preSeed: PRE, goSeed: GO, gpu: uuid, m: 256, n: 256, k: 256, roots: rootsOf(entry.roots), openings: opened }), null, `${uuid}: the openings check`);
  }
  t.same(res.openings.map((o) => [o.uuid, o.round, o.row]), [[uuids[1], 2, 17], [uuids[0], 0, 3], [uuids[1], 2, 200], [uuids[0], 1, 255]], 'in the order asked');
  t.match(res.stderr, /GPU 1: 3 rounds in [0-9.]+ s of GPU time/);
});

t.test('behavior: a GPU that skips rows of the product commits to them, and the rows it skipped fail the check', async (t) => {
  const uuid = 'GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf';
  const res = await runChallenge(CHALLENGE, GO.toString('hex'), () => rowsOf(`${uuid}:1:4 ${uuid}:1:5`), { FAKE_CUDA_CHALLENGE_SKIP: '2' });
  t.equal(res.code, 0, res.stderr);
  const roots = rootsOf(res.commit[0]!.roots);
  const [skipped, computed] = openingsOf(res.openings, uuid);
  const check = (o: typeof skipped) => checkOpenings({ preSeed: PRE, goSeed: GO, gpu: uuid, m: 256, n: 256, k: 256, roots, openings: [o!] });
  t.match(check(skipped), /round 1 row 4: the product's row and the Merkle path sent do not lead to the committed root/);
  t.equal(check(computed), null, 'a row it computed passes');
});

t.test('behavior: --challenge refuses bad parameters and bad lines on stdin with exit 2, naming what is wrong', async (t) => {
  const missing = await runProgram(bin, ['--challenge', '--m', '256', '--n', '256', '--k', '256', '--pre-seed', PRE.toString('hex')]);
  t.equal(missing.code, 2);
  t.match(missing.stderr, /--challenge needs --rounds/);
  const odd = await runProgram(bin, ['--challenge', '--m', '384']);
  t.equal(odd.code, 2);
  t.match(odd.stderr, /--m must be a power of two, not 384/);
  const seed = await runProgram(bin, ['--challenge', '--pre-seed', 'xyz']);
  t.match(seed.stderr, /--pre-seed must be 64 hex digits, not "xyz"/);
  const badGo = await runChallenge(CHALLENGE, '12', () => []);
  t.equal(badGo.code, 2);
  t.match(badGo.stderr, /expected "go" and 64 hex digits on stdin, got "go 12"/);
  t.equal(badGo.error, 'gpu-bench exited with 2 before its commit line: expected "go" and 64 hex digits on stdin, got "go 12"', 'the driver\'s one line: what happened and the program\'s reason');
  const badOpen = await runChallenge(CHALLENGE, GO.toString('hex'), () => rowsOf('GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf:3:0'));
  t.equal(badOpen.code, 2);
  t.match(badOpen.stderr, /cannot open "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf:3:0": give UUID:ROUND:ROW of a GPU of this challenge, a round below 3 and a row below 256/);
  t.match(badOpen.error, /^gpu-bench exited with 2 before its openings line: cannot open "GPU-a0a1a2a3-/);
});

t.test('error: a gpu-bench that dies ends the driver\'s step with one line: its exit and its reason', async (t) => {
  const noGpu = await runChallenge(CHALLENGE, GO.toString('hex'), () => [], { FAKE_CUDA_INIT_ERROR: '100' });
  t.equal(noGpu.code, 5);
  t.match(noGpu.error, /^gpu-bench exited with 5 before its ready line: no NVIDIA GPU is visible to the driver \(CUDA_ERROR_NO_DEVICE/);
  t.notMatch(noGpu.error, /\n/, 'one line');
  // Killed while it runs the chain: the step ends, naming the signal.
  const session = new GpuBenchSession(spawnGpuBench([bin], ['--challenge', ...CHALLENGE], { env: { ...process.env, LD_LIBRARY_PATH: fakeDir } }));
  await session.ready();
  const commit = session.go(GO.toString('hex'));
  await session.stop();
  await t.rejects(commit, { name: 'GpuBenchError', message: /^gpu-bench killed by SIGKILL before its commit line/, exitCode: null });
});
