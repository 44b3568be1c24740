import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { fakeNvidiaSmi } from '@gpufarm/agent/testing/fake-nvidia-smi';
import { buildFakeLibcuda, buildGpuBenchRootfs, REPO_ROOT, runProgram } from '@gpufarm/agent/testing/gpu-bench';

/**
 * scripts/gpu-check.sh on this machine, which has no GPU: with no nvidia-smi, with one whose
 * driver is gone, and on a fake GPU (a fake nvidia-smi for the agent's inventory, the fake
 * libcuda.so.1 for gpu-bench) with no PyTorch, where it prints the figures without ratios.
 */

t.setTimeout(900_000);

const SCRIPT = join(REPO_ROOT, 'scripts/gpu-check.sh');
const work = mkdtempSync(join(tmpdir(), 'gpu-check-test-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));

t.test('behavior: with no nvidia-smi it says there is no NVIDIA GPU here and exits 3', async (t) => {
  // A PATH with only what the script runs before it looks for nvidia-smi.
  const bin = join(work, 'bare-bin');
  mkdirSync(bin);
  for (const tool of ['bash', 'dirname', 'mktemp', 'rm']) symlinkSync((await runProgram('bash', ['-c', `command -v ${tool}`])).stdout.trim(), join(bin, tool));
  const res = await runProgram(join(bin, 'bash'), [SCRIPT], { PATH: bin });
  t.equal(res.code, 3, res.stderr);
  t.match(res.stdout, /no NVIDIA GPU here: nvidia-smi is not installed \(no NVIDIA driver\)/);
});

t.test('behavior: when nvidia-smi cannot reach the driver it shows its words and exits 3', async (t) => {
  const smi = fakeNvidiaSmi('h100-80gb-hbm3');
  t.teardown(smi.cleanup);
  smi.breakDriver();
  const res = await runProgram('bash', [SCRIPT], { PATH: smi.path });
  t.equal(res.code, 3, res.stderr);
  t.match(res.stdout, /NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver/);
  t.match(res.stdout, /no NVIDIA GPU here: nvidia-smi lists none \(above\)/);
});

t.test('default: on a GPU without PyTorch it runs the inventory and gpu-bench and prints the figures without ratios', async (t) => {
  const smi = fakeNvidiaSmi('h100-80gb-hbm3');
  t.teardown(smi.cleanup);
  const rootfs = await buildGpuBenchRootfs(join(work, 'rootfs'));
  const fake = await buildFakeLibcuda(work);
  // Python without its site packages: whatever this machine has installed, no torch is importable.
  const python = join(work, 'python-without-site');
  writeFileSync(python, '#!/bin/sh\nexec python3 -I -S "$@"\n', { mode: 0o755 });
  const res = await runProgram(
    'bash',
    [SCRIPT, '--binary', rootfs, '--matmul-size', '256', '--seconds', '0.05', '--python', python, '--challenge-plan', 'simulated', '--', '--copy-mib', '64', '--transfer-mib', '16'],
    { PATH: smi.path, LD_LIBRARY_PATH: fake, FAKE_CUDA_UUIDS: 'GPU-2c1e6a2f-63c4-9a2b-6f56-5c1de4c7c7a0' },
  );
  t.equal(res.code, 0, `${res.stdout}\n${res.stderr}`);
  t.match(res.stdout, /GPU 0: NVIDIA H100 80GB HBM3 \(UUID: GPU-2c1e6a2f-/, "nvidia-smi's list");
  t.match(res.stdout, /"classId": "h100-80gb-sxm"/, "the agent's inventory of that nvidia-smi");
  t.match(res.stdout, /gpu-bench 1\.0\.0 \(build [0-9a-f]{16}\)/, 'the binary it runs, by its own glibc');
  t.match(res.stdout, /\{"uuid":"GPU-2c1e6a2f-63c4-9a2b-6f56-5c1de4c7c7a0".*"bf16MatmulGflops":[0-9.]+/, "gpu-bench's JSON line");
  t.match(res.stdout, /PyTorch with CUDA is not importable by .*python-without-site: figures without PyTorch ratios/, 'no PyTorch, said plainly');
  t.match(res.stdout, /GPU 0 Fake GPU 0 .*, code fatbin; no PyTorch to compare with\n {2}bf16MatmulGflops +[0-9.]+ GFLOPS\n/, 'the figures, tabulated');
  t.match(res.stdout, /exactness: a 512x512x1024 chain of 2 rounds on every GPU, recomputed whole on the CPU\n +GPU-2c1e6a2f-63c4-9a2b-6f56-5c1de4c7c7a0 NVIDIA H100 80GB HBM3: roots equal the CPU's; openings pass {2}PASS/, 'the challenge on the GPU is the CPU\'s, bit for bit');
  t.match(res.stdout, /timed: GPU-2c1e6a2f-\S+ NVIDIA H100 80GB HBM3, the simulated plan: 256x256x256, 4 rounds\n +go to commitment [0-9.]+ s, GPU time [0-9.]+ s, [0-9.]+ int8 TOPS\n +deadline met; 16 openings pass {2}PASS\n +PASS: the GPU challenge/, 'the timed challenge and its check');
  t.notMatch(res.stdout.split('== Result')[1] ?? '', /PASS|FAIL/, 'no figure verdict without PyTorch');
});

t.test('behavior: a gpu-bench refusal is its exit, with its reason', async (t) => {
  const smi = fakeNvidiaSmi('l4');
  t.teardown(smi.cleanup);
  const rootfs = await buildGpuBenchRootfs(join(work, 'rootfs'));
  const fake = await buildFakeLibcuda(work);
  const res = await runProgram('bash', [SCRIPT, '--binary', join(rootfs, 'gpu-bench'), '--matmul-size', '256', '--seconds', '0.05'], {
    PATH: smi.path,
    LD_LIBRARY_PATH: fake,
    FAKE_CUDA_DRIVER_VERSION: '10020',
  });
  t.equal(res.code, 1);
  t.match(res.stderr, /the NVIDIA driver is too old: it supports CUDA 10\.2/);
  t.match(res.stdout, /gpu-bench exited with 4 \(its reason is above\)/);
});
