#!/usr/bin/env bash
# The device check (docs/gpu-benchmark.md): on any NVIDIA machine, without Docker, it
#   1. lists the GPUs with the real nvidia-smi, and says so plainly when there is none;
#   2. runs the agent's inventory on that nvidia-smi (gf-agent inventory: what the control plane
#      would be told), from this checkout (npm install done) or an installed gf-agent;
#   3. builds gpu-bench with nvcc (scripts/build-gpu-bench.sh), or takes the binary it is given
#      or one that is already here, and runs it on every GPU (or those of --gpus);
#   4. where PyTorch with CUDA is importable, measures the same figures with it in the same run
#      (bf16 and fp16 torch.matmul at the same size, 8192^3 by default; a device-to-device copy;
#      host-to-device and device-to-host copies from pinned memory) and prints each ratio with
#      its target: memory bandwidth >= 0.85x PyTorch's copy, matmul >= 0.5x PyTorch's (cuBLAS);
#   5. runs the GPU challenge (gpu-bench --challenge, scripts/src/gpu-challenge-check.ts): a small
#      chain the CPU recomputes bit for bit, then each GPU's class challenge timed against its
#      deadline, its openings checked as the server checks them (needs this checkout's node_modules).
#
# Usage: scripts/gpu-check.sh [--binary PATH] [--gpus LIST] [--matmul-size N] [--seconds S] [--python PATH]
#                              [--challenge-plan class|simulated] [-- GPU_BENCH_ARGS...]
#   --binary PATH   a gpu-bench binary, or an image root holding one (dist/gpu-bench/ of the agent
#                   package, .gpufarm/gpu-bench/rootfs); run with that root's own glibc when it has one
#   --python PATH   the Python with PyTorch (default: python3, else python)
#   --challenge-plan  class (default): each GPU's class challenge; simulated: the simulated GPU's
#                   small one (a fake driver)
#   after --        more arguments for gpu-bench (gpu-bench --help), such as --copy-mib 4096
# Exit status: 0 every figure measured and every target met (or no PyTorch to compare with);
# 1 a step failed or a target was missed; 2 bad arguments; 3 no NVIDIA GPU or driver here.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BINARY=""
GPUS=""
SIZE=8192
SECONDS_PER_FIGURE=1
PYTHON=""
CHALLENGE_PLAN=class
EXTRA=()

usage() { printf 'usage: %s [--binary PATH] [--gpus LIST] [--matmul-size N] [--seconds S] [--python PATH] [--challenge-plan class|simulated] [-- GPU_BENCH_ARGS...]\n' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) [ $# -ge 2 ] || usage; BINARY=$2; shift 2 ;;
    --gpus) [ $# -ge 2 ] || usage; GPUS=$2; shift 2 ;;
    --matmul-size) [ $# -ge 2 ] || usage; SIZE=$2; shift 2 ;;
    --seconds) [ $# -ge 2 ] || usage; SECONDS_PER_FIGURE=$2; shift 2 ;;
    --python) [ $# -ge 2 ] || usage; PYTHON=$2; shift 2 ;;
    --challenge-plan) [ $# -ge 2 ] && [[ "$2" =~ ^(class|simulated)$ ]] || usage; CHALLENGE_PLAN=$2; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) printf 'gpu-check: unknown argument "%s"\n' "$1" >&2; usage ;;
  esac
done
[[ "$SIZE" =~ ^[0-9]+$ ]] || { printf 'gpu-check: --matmul-size takes a whole number, not "%s"\n' "$SIZE" >&2; exit 2; }

say() { printf 'gpu-check: %s\n' "$*"; }
section() { printf '\n== %s\n' "$*"; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0

section "GPUs (nvidia-smi)"
if ! command -v nvidia-smi >/dev/null 2>&1; then
  say "no NVIDIA GPU here: nvidia-smi is not installed (no NVIDIA driver). This check needs a machine with an NVIDIA GPU and its driver."
  exit 3
fi
if ! nvidia-smi -L >"$work/smi.txt" 2>&1 || ! grep -q '^GPU [0-9]' "$work/smi.txt"; then
  sed 's/^/  /' "$work/smi.txt"
  say "no NVIDIA GPU here: nvidia-smi lists none (above). This check needs a machine with an NVIDIA GPU and a working driver."
  exit 3
fi
sed 's/^/  /' "$work/smi.txt"
nvidia-smi --query-gpu=index,name,driver_version,compute_cap,pci.bus_id,memory.total,power.limit --format=csv 2>/dev/null | sed 's/^/  /' || true

section "The agent's inventory (gf-agent inventory on this nvidia-smi)"
inventory=()
if [ -f "$ROOT/agent/bin/gf-agent.js" ] && [ -d "$ROOT/node_modules/tsx" ] && command -v node >/dev/null 2>&1; then
  inventory=(node "$ROOT/agent/bin/gf-agent.js" inventory)
elif command -v gf-agent >/dev/null 2>&1; then
  inventory=(gf-agent inventory)
fi
if [ ${#inventory[@]} -eq 0 ]; then
  say "not run: no installed gf-agent, and this checkout has no node_modules (run npm install with Node 20 or newer)"
else
  # A state folder of its own: the check touches no enrollment and needs no control plane.
  if GF_AGENT_STATE_DIR="$work/agent-state" GF_AGENT_SIMULATE_GPUS='' "${inventory[@]}" >"$work/inventory.json" 2>"$work/inventory.err"; then
    sed 's/^/  /' "$work/inventory.json"
  else
    sed 's/^/  /' "$work/inventory.err"
    say "the agent's inventory failed (above)"
    status=1
  fi
fi

section "gpu-bench"
run_bench=()
if [ -n "$BINARY" ]; then
  [ -e "$BINARY" ] || { say "--binary $BINARY does not exist"; exit 2; }
elif command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] || [ -n "${NVCC:-}" ]; then
  say "building it with nvcc (scripts/build-gpu-bench.sh; cached by its sources)"
  BINARY=$(bash "$ROOT/scripts/build-gpu-bench.sh") || { say "building gpu-bench failed (above)"; exit 1; }
else
  for candidate in "$ROOT/.gpufarm/gpu-bench/rootfs" /usr/lib/gf-agent/dist/gpu-bench; do
    if [ -x "$candidate/gpu-bench" ]; then BINARY=$candidate; break; fi
  done
  [ -n "$BINARY" ] || { say "no nvcc to build gpu-bench and no binary here: install the CUDA toolkit (nvcc), or pass --binary PATH (an agent package's dist/gpu-bench)"; exit 1; }
fi
if [ -d "$BINARY" ]; then
  # An image root: its own loader and glibc, so a binary built on a newer distribution runs here;
  # the host's libcuda.so.1 is found as usual (LD_LIBRARY_PATH, ld.so.cache, the driver's folders).
  loader=$(find "$BINARY/lib64" "$BINARY/lib" -maxdepth 2 -name 'ld-linux*.so*' 2>/dev/null | head -n 1)
  libc=$(find "$BINARY/lib" -maxdepth 2 -name 'libc.so.6' 2>/dev/null | head -n 1)
  if [ -n "$loader" ] && [ -n "$libc" ]; then run_bench=("$loader" --library-path "$(dirname "$libc")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$BINARY/gpu-bench")
  else run_bench=("$BINARY/gpu-bench"); fi
else
  run_bench=("$BINARY")
fi
say "running ${run_bench[*]}"
"${run_bench[@]}" --version | sed 's/^/  /'
bench_args=(--matmul-size "$SIZE" --seconds "$SECONDS_PER_FIGURE")
[ -z "$GPUS" ] || bench_args+=(--gpus "$GPUS")
bench_args+=("${EXTRA[@]}")
"${run_bench[@]}" "${bench_args[@]}" >"$work/bench.jsonl"
bench_status=$?
sed 's/^/  /' "$work/bench.jsonl"
if [ "$bench_status" -ne 0 ]; then
  say "gpu-bench exited with $bench_status (its reason is above)"
  [ "$bench_status" -eq 3 ] && exit 3
  status=1
fi
[ -s "$work/bench.jsonl" ] || { say "gpu-bench printed no figures"; exit 1; }

section "The GPU challenge (gpu-bench --challenge, checked as the server checks it)"
if [ ! -s "$work/inventory.json" ]; then
  say "not run: it needs the agent's inventory (above)"
elif [ ! -d "$ROOT/node_modules/tsx" ]; then
  say "not run: it needs this checkout's node_modules (npm install)"
else
  node --import tsx "$ROOT/scripts/src/gpu-challenge-check.ts" --inventory "$work/inventory.json" --plan "$CHALLENGE_PLAN" -- "${run_bench[@]}" 2>&1 | sed 's/^/  /'
  [ "${PIPESTATUS[0]}" -eq 0 ] || { say "the GPU challenge failed (above)"; status=1; }
fi

section "PyTorch on the same GPUs"
python=${PYTHON:-$(command -v python3 || command -v python || true)}
torch_ok=0
if [ -z "$python" ]; then
  say "no python here: figures without PyTorch ratios"
elif ! "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  say "PyTorch with CUDA is not importable by $python: figures without PyTorch ratios (pip install torch to compare)"
else
  torch_ok=1
  # The GPUs gpu-bench measured, by UUID; PyTorch numbers them as nvidia-smi does with PCI_BUS_ID.
  CUDA_DEVICE_ORDER=PCI_BUS_ID "$python" - "$work/bench.jsonl" "$SIZE" "$SECONDS_PER_FIGURE" >"$work/torch.jsonl" <<'PY' || { say "the PyTorch measurement failed (above)"; status=1; torch_ok=0; }
import json, math, statistics, sys, torch

bench = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
size, seconds = int(sys.argv[2]), float(sys.argv[3])

def rate(fn):
    """Calls per second: a warm-up, then batches of about 50 ms for `seconds`; the median batch."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    def batch(reps):
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000
    fn(); torch.cuda.synchronize()
    reps = max(1, math.ceil(0.05 / batch(1)))
    warm = 0.0
    while warm < seconds / 4:
        warm += batch(reps)
    rates, spent = [], 0.0
    while spent < seconds or len(rates) < 5:
        t = batch(reps)
        spent += t
        rates.append(reps / t)
    return statistics.median(rates)

def uuid_of(i):
    try:
        return 'GPU-' + str(torch.cuda.get_device_properties(i).uuid)
    except Exception:
        return None

for b in bench:
    index = next((i for i in range(torch.cuda.device_count()) if uuid_of(i) == b['uuid']), b['index'])
    torch.cuda.set_device(index)
    out = {'uuid': b['uuid'], 'torchIndex': index, 'torch': torch.__version__, 'cuda': torch.version.cuda}
    for dtype, name in ((torch.bfloat16, 'bf16'), (torch.float16, 'fp16')):
        a = torch.randn(size, size, device='cuda', dtype=dtype)
        w = torch.randn(size, size, device='cuda', dtype=dtype)
        c = torch.empty(size, size, device='cuda', dtype=dtype)
        # A times B transposed, the layout gpu-bench times (cuBLAS "TN")
        out[name + 'MatmulGflops'] = rate(lambda: torch.matmul(a, w.t(), out=c)) * 2 * size ** 3 / 1e9
        del a, w, c
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, device='cuda')
    dst = torch.empty_like(src)
    out['memoryBandwidthMbps'] = rate(lambda: dst.copy_(src)) * 2 * n / 1e6
    del src, dst
    n = 256 << 20
    host = torch.empty(n, dtype=torch.uint8).pin_memory()
    dev = torch.empty(n, dtype=torch.uint8, device='cuda')
    out['hostToDeviceMbps'] = rate(lambda: dev.copy_(host, non_blocking=True)) * n / 1e6
    out['deviceToHostMbps'] = rate(lambda: host.copy_(dev, non_blocking=True)) * n / 1e6
    del host, dev
    torch.cuda.empty_cache()
    print(json.dumps(out), flush=True)
PY
  [ "$torch_ok" = 1 ] && sed 's/^/  /' "$work/torch.jsonl"
fi

section "Result"
if [ -z "$python" ]; then
  say "(no python to tabulate: the JSON lines above are the figures)"
  exit "$status"
fi
"$python" - "$work/bench.jsonl" "$work/torch.jsonl" "$torch_ok" <<'PY'
import json, os, sys
bench = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
torch = {}
if sys.argv[3] == '1' and os.path.exists(sys.argv[2]):
    torch = {t['uuid']: t for t in (json.loads(l) for l in open(sys.argv[2]) if l.startswith('{'))}
# figure, unit, target ratio to PyTorch (None: shown, no target)
rows = [('bf16MatmulGflops', 'GFLOPS', 0.5), ('fp16MatmulGflops', 'GFLOPS', 0.5), ('memoryBandwidthMbps', 'MB/s', 0.85),
        ('hostToDeviceMbps', 'MB/s', None), ('deviceToHostMbps', 'MB/s', None), ('fp32Gflops', 'GFLOPS', None)]
missed = 0
for b in bench:
    t = torch.get(b['uuid'])
    print(f"GPU {b['index']} {b['name']} ({b['uuid']}), compute capability {b['computeCapability']}, driver CUDA {b['driverCudaVersion']}, code {b.get('gpuCode', 'fatbin')}"
          + (f"; PyTorch {t['torch']} (CUDA {t['cuda']})" if t else '; no PyTorch to compare with'))
    for key, unit, target in rows:
        ours = b.get(key)
        if ours is None:
            print(f"  {key:22} {'-':>14}  (not on this GPU)")
            continue
        line = f"  {key:22} {ours:14.1f} {unit}"
        theirs = t.get(key) if t else None
        if theirs:
            ratio = ours / theirs
            line += f"   PyTorch {theirs:14.1f}   ratio {ratio:5.2f}"
            if target is not None:
                ok = ratio >= target
                missed += not ok
                line += f"   target >= {target:.2f}  {'PASS' if ok else 'FAIL'}"
        print(line)
if torch:
    print('PASS: every target met' if missed == 0 else f'FAIL: {missed} target(s) missed')
sys.exit(1 if missed else 0)
PY
[ $? -eq 0 ] || status=1
exit "$status"
